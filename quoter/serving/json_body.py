"""Request bodies read as JSON, with errors that say what is wrong: a body that is too large (413), not JSON
by its Content-Type (415), or not UTF-8, not valid JSON, or nested too deeply to read (400)."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response, status
from fastapi.routing import APIRoute


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON: application/json or application/...+json."""
    media_type = (content_type or "").partition(";")[0].strip().lower()
    return media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json"))


class JSONBodyRequest(Request):
    """A request whose body is read up to `max_body_bytes` and parsed as strict UTF-8 JSON."""

    def __init__(self, request: Request, max_body_bytes: int) -> None:
        super().__init__(request.scope, request.receive)
        self.max_body_bytes = max_body_bytes

    def _too_large(self) -> HTTPException:
        detail = f"the request body is larger than {self.max_body_bytes:,} bytes"
        return HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail)

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
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
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                detail = f"the body is not UTF-8: {error.reason} at byte {error.start}"
                raise HTTPException(status.HTTP_400_BAD_REQUEST, detail) from None
            try:
                self._json = json.loads(text)
            except json.JSONDecodeError as error:
                detail = f"the body is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
                raise HTTPException(status.HTTP_400_BAD_REQUEST, detail) from None
            except RecursionError:
                raise HTTPException(status.HTTP_400_BAD_REQUEST, "the body's JSON is nested too deeply") from None
        return self._json


def json_body_route(max_body_bytes: int) -> type[APIRoute]:
    """The route class of an API whose request bodies must be JSON of at most `max_body_bytes`."""

    class JSONBodyRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()
            takes_body = self.body_field is not None

            async def handle(request: Request) -> Response:
                if not takes_body:
                    return await handler(request)
                if not is_json_media_type(request.headers.get("content-type")):
                    detail = "the body must be JSON, sent with the header Content-Type: application/json"
                    raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail)
                return await handler(JSONBodyRequest(request, max_body_bytes))

            return handle

    return JSONBodyRoute
