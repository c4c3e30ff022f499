"""A deadline for each request's head (its request line and headers), which uvicorn does not have: its h11
protocol waits for the rest of a head as long as bytes keep coming, and for the first bytes of a new
connection forever, so that clients sending a byte now and then hold connections open without limit.

The body has its own deadline where it is read (json_body); an idle connection between requests has
uvicorn's keep-alive timeout.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class _HeadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request head has not arrived `head_timeout_s`
    seconds after the connection opened, or after the head's first byte on a reused connection."""

    head_timeout_s: float
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._start_head_deadline()

    def data_received(self, data: bytes) -> None:
        # Between requests h11 waits in IDLE; the first byte of the next head starts its deadline.
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:
            self._start_head_deadline()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection failed)
            self._stop_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_deadline()
        super().connection_lost(exc)

    def _start_head_deadline(self) -> None:
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def head_timeout_protocol(head_timeout_s: float) -> type[H11Protocol]:
    """The HTTP protocol class for uvicorn.run's `http`: uvicorn's h11 protocol, closing a connection whose
    request head takes longer than `head_timeout_s` seconds to arrive."""
    return type("HeadTimeoutH11Protocol", (_HeadTimeoutProtocol,), {"head_timeout_s": head_timeout_s})
