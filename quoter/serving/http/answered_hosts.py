"""Requests are answered only for the Host names a server is set to answer (ServerLimits.allowed_hosts), so
that a web page cannot reach a local server through DNS rebinding; others get 400 in the API's error shape."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import status
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from quoter.serving.http.api_errors import error_response
from quoter.serving.http.server_limits import ANY_HOST


def host_name(header: str) -> str:
    """A Host header's name without its port, in lower case; an IPv6 literal keeps its brackets, as the
    header writes it (`[::1]:8000` is `[::1]`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.partition(":")[0]


class AnsweredHosts:
    """ASGI middleware: an HTTP request whose Host header names none of `hosts` gets 400. A host may be a name,
    "*" for any, or "*.example.com" for the names under example.com."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = [host.lower() for host in hosts]

    def answers(self, header: str | None) -> bool:
        """Whether a request with this Host header (None: none) is answered."""
        if ANY_HOST in self.hosts:
            return True
        name = host_name(header or "")
        return bool(name) and any(
            name == host or (host.startswith("*.") and name.endswith(host[1:])) for host in self.hosts
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.answers(Headers(scope=scope).get("host")):
            refused = error_response(
                status.HTTP_400_BAD_REQUEST, "this server does not answer that Host name", "host_not_answered",
                ("header", "host"),
            )  # fmt: skip
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)
