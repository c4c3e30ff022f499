"""Admission of recommendation work: a bounded number of contexts wait for the model; requests beyond wait
nowhere and are refused at once, so that a client can retry later or elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from quoter.errors import QuoterError


class ServerBusyError(QuoterError):
    """Taking a request would put more contexts in the queue than the server allows."""


class ContextAdmission:
    """Counts the contexts that wait for a model call or are in one, and refuses any that would pass `limit`.

    Requests run on one event loop, so the count needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting = 0

    @contextmanager
    def admit(self, contexts: int) -> Iterator[None]:
        """Count `contexts` as waiting inside the block; raise ServerBusyError if that would pass the limit."""
        if self.waiting + contexts > self.limit:
            raise ServerBusyError(f"the server is busy ({self.waiting} contexts wait for the model); retry later")
        self.waiting += contexts
        try:
            yield
        finally:
            self.waiting -= contexts
