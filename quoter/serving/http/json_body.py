"""Request bodies read as JSON, with errors that say what is wrong: a body that is too large (413), not JSON
by its Content-Type (415), not UTF-8, not valid JSON, or nested too deeply to read (400), slower to arrive
than the server waits (408, and the connection is closed), with an integer too long to read (422 naming
the field), or whose length the head gives twice, by Transfer-Encoding and Content-Length (400, and the
connection is closed). A route's checks of the head alone (HeadCheck: the API key) come before any of these."""

from __future__ import annotations

import asyncio
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from quoter.serving.http.api_errors import ApiError, error_response
from quoter.text_lines import OverlongInteger, read_integer

BODY = ("body",)


def _readable(error: dict[str, Any]) -> dict[str, Any]:
    """A field's validation error, told the real reason when the field was an overlong integer."""
    if not isinstance(error.get("input"), OverlongInteger):
        return error
    limit = sys.get_int_max_str_digits()
    return {**error, "type": "int_too_long", "msg": f"the number has more than {limit:,} digits"}


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON: application/json or application/...+json."""
    media_type = (content_type or "").partition(";")[0].strip().lower()
    return media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json"))


class HeadCheck(ABC):
    """A route dependency that the request's headers alone decide (given in `dependencies=`). FastAPI reads and
    parses a body before it solves a route's dependencies; a JSON body route runs its head checks first, so that
    e.g. a write without its API key gets 401 whatever its body, not 413, 415 or 400. FastAPI still runs the
    dependency in its turn (which documents it in the OpenAPI document)."""

    @abstractmethod
    def check_head(self, headers: Headers) -> None:
        """Raise the request's error (an ApiError) when its headers fail the check."""


class UnambiguousBodies:
    """ASGI middleware: a request whose head gives its body's length two ways, by Transfer-Encoding and by
    Content-Length, gets 400 and the connection is closed, as RFC 9112 (6.3) asks: a proxy in front may have
    read the body by the other header, and taken what is left of it for another request (request smuggling)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            if "transfer-encoding" in headers and "content-length" in headers:
                refused = error_response(
                    status.HTTP_400_BAD_REQUEST,
                    "the request gives its body's length twice, by Transfer-Encoding and Content-Length; give one",
                    "body_length_ambiguous",
                    ("header", "content-length"),
                    {"Connection": "close"},  # the body is left unread: the connection can carry nothing more
                )
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class JSONBodyRequest(Request):
    """A request whose body is read up to `max_body_bytes` within `body_timeout_s` seconds and parsed as strict
    UTF-8 JSON."""

    def __init__(self, request: Request, max_body_bytes: int, body_timeout_s: float) -> None:
        super().__init__(request.scope, request.receive)
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    def _too_large(self) -> ApiError:
        detail = f"the request body is larger than {self.max_body_bytes:,} bytes"
        return ApiError(status.HTTP_413_CONTENT_TOO_LARGE, detail, "too_large", BODY)

    async def _read(self) -> bytes:
        # A body that says it is too large is refused unread; one sent in chunks, once it grows too large.
        declared = self.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self._too_large()
        chunks, size = [], 0
        async for chunk in self.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            # One deadline for the whole body: a client that sends a byte now and then holds no connection long.
            try:
                self._body = await asyncio.wait_for(self._read(), self.body_timeout_s)
            except asyncio.TimeoutError:
                detail = f"the request body did not arrive within {self.body_timeout_s:g} s"
                # The rest of the body may still come: the connection cannot serve another request.
                raise ApiError(
                    status.HTTP_408_REQUEST_TIMEOUT, detail, "body_timeout", BODY, {"Connection": "close"}
                ) from None
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                detail = f"the body is not UTF-8: {error.reason} at byte {error.start}"
                raise ApiError(status.HTTP_400_BAD_REQUEST, detail, "json_invalid", BODY) from None
            try:
                self._json = json.loads(text, parse_int=read_integer)
            except json.JSONDecodeError as error:
                detail = f"the body is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
                raise ApiError(status.HTTP_400_BAD_REQUEST, detail, "json_invalid", BODY) from None
            except RecursionError:
                detail = "the body's JSON is nested too deeply"
                raise ApiError(status.HTTP_400_BAD_REQUEST, detail, "json_invalid", BODY) from None
        return self._json


def json_body_route(max_body_bytes: int, body_timeout_s: float) -> type[APIRoute]:
    """The route class of an API whose request bodies must be JSON of at most `max_body_bytes`, sent within
    `body_timeout_s` seconds."""

    class JSONBodyRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()
            takes_body = self.body_field is not None
            head_checks = [d.dependency for d in self.dependencies if isinstance(d.dependency, HeadCheck)]

            async def handle(request: Request) -> Response:
                if not takes_body:
                    return await handler(request)
                for check in head_checks:
                    check.check_head(request.headers)
                if not is_json_media_type(request.headers.get("content-type")):
                    detail = "the body must be JSON, sent with the header Content-Type: application/json"
                    loc = ("header", "content-type")
                    raise ApiError(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail, "unsupported_media_type", loc)
                try:
                    return await handler(JSONBodyRequest(request, max_body_bytes, body_timeout_s))
                except RequestValidationError as error:
                    raise RequestValidationError([_readable(e) for e in error.errors()]) from None

            return handle

    return JSONBodyRoute
