"""uvicorn's h11 protocol as the server runs it: with a deadline for each request's head (its request line and
headers), and a request that h11 cannot read answered in the API's error shape.

uvicorn has no such deadline: its h11 protocol waits for the rest of a head as long as bytes keep coming, and
for the first bytes of a new connection forever, so that clients sending a byte now and then hold connections
open without limit. The body has its own deadline where it is read (json_body); an idle connection between
requests has uvicorn's keep-alive timeout.

A request h11 refuses (no Host header or two, a bad request line, header or Content-Length, a head too long)
got uvicorn's 400 in plain text; it gets the 400 of every other error (api_errors), and the connection is
closed, as uvicorn closes it.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from quoter.serving.http.api_errors import error_response

# h11's own message may quote the request, which an error never repeats.
UNREADABLE = "the request is not valid HTTP/1.1: its request line or headers are malformed, or too long"


class _ServerProtocol(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request head has not arrived `head_timeout_s`
    seconds after the connection opened, or after the head's first byte on a reused connection, and answers a
    request it cannot read with the API's 400."""

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

    def send_400_response(self, msg: str) -> None:
        """Answer a request h11 cannot read (uvicorn calls this with its own text) and close the connection."""
        bad = HTTPStatus.BAD_REQUEST
        response = error_response(bad, UNREADABLE, "request_invalid")
        head = h11.Response(
            status_code=bad, headers=[*response.raw_headers, (b"connection", b"close")], reason=bad.phrase
        )
        for event in (head, h11.Data(data=response.body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

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


def server_protocol(head_timeout_s: float) -> type[H11Protocol]:
    """The HTTP protocol class for uvicorn.run's `http`: uvicorn's h11 protocol, closing a connection whose
    request head takes longer than `head_timeout_s` seconds to arrive, and answering a request it cannot read
    in the API's error shape."""
    return type("QuoterH11Protocol", (_ServerProtocol,), {"head_timeout_s": head_timeout_s})
