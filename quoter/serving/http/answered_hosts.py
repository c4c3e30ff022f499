"""Requests are answered only for the Host names a server is set to answer (ServerLimits.allowed_hosts), so
that a web page cannot reach a local server through DNS rebinding; others get 400 in the API's error shape, as
does a Host header that is not one name or [IPv6 address] with an optional port, or that is given twice."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from fastapi import status
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from quoter.serving.http.api_errors import error_response
from quoter.serving.http.server_limits import ANY_HOST

# RFC 9110's Host, read strictly: a DNS name or IPv4 address, or an IPv6 address in brackets; then a port.
HOST_HEADER = re.compile(r"(?P<name>[a-z0-9._-]+|\[(?P<ipv6>[0-9a-f:.]+)\])(?::(?P<port>[0-9]{1,5}))?")
HIGHEST_PORT = 65535


def host_name(header: str) -> str | None:
    """A Host header's name without its port, in lower case; an IPv6 literal keeps its brackets, as the
    header writes it (`[::1]:8000` is `[::1]`). None for a header that is no name with an optional port from 1
    to 65535 (`[::1]evil.example`, `localhost:99999`)."""
    parsed = HOST_HEADER.fullmatch(header.strip().lower())
    if parsed is None or (parsed["port"] is not None and not 1 <= int(parsed["port"]) <= HIGHEST_PORT):
        return None
    if parsed["ipv6"] is not None:
        try:
            ipaddress.IPv6Address(parsed["ipv6"])
        except ValueError:
            return None
    return parsed["name"]


class AnsweredHosts:
    """ASGI middleware: an HTTP request whose Host header names none of `hosts` gets 400, as does one whose
    Host header is malformed or given twice. A host may be a name, "*" for any, or "*.example.com" for the
    names under example.com."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = [host.lower() for host in hosts]

    def answers(self, name: str | None) -> bool:
        """Whether a request for this Host name (None: no Host header) is answered."""
        if ANY_HOST in self.hosts:
            return True
        return name is not None and any(
            name == host or (host.startswith("*.") and name.endswith(host[1:])) for host in self.hosts
        )

    def refusal(self, headers: Sequence[str]) -> JSONResponse | None:
        """The 400 of a request with these Host headers; None when it is answered."""
        names = [host_name(header) for header in headers]
        if len(names) > 1 or None in names:
            return error_response(
                status.HTTP_400_BAD_REQUEST, "the Host header must be given once, as a name with an optional port",
                "host_invalid", ("header", "host"),
            )  # fmt: skip
        if not self.answers(names[0] if names else None):
            return error_response(
                status.HTTP_400_BAD_REQUEST, "this server does not answer that Host name", "host_not_answered",
                ("header", "host"),
            )  # fmt: skip
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.refusal(Headers(scope=scope).getlist("host")) if scope["type"] == "http" else None
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)
