"""Request bodies read as JSON, with errors that say what is wrong: a body that is too large (413), not JSON
by its Content-Type (415), not UTF-8, not valid JSON, or nested too deeply to read (400), slower to arrive
than the server waits (408, and the connection is closed), or with an integer too long to read (422 naming
the field)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from quoter.serving.http.api_errors import ApiError
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

            async def handle(request: Request) -> Response:
                if not takes_body:
                    return await handler(request)
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
