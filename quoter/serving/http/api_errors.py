"""The one shape of every error the HTTP API answers, whatever its status: `{"detail": [{"loc", "msg", "type"}]}`
(schemas.ErrorResponse), the shape FastAPI gives an invalid request. `loc` says where the fault is ("body",
"query", "path" or "header", then the field; empty for the request as a whole), `msg` what it is, `type` its
kind for programs; none of them repeats what was sent, which may be megabytes long or not even encodable.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import HTTPExceptionHandler

from quoter.serving.http.schemas import ErrorResponse


class ApiError(HTTPException):
    """An error answered with `status_code`: what is wrong (msg), its kind (type) and where (loc)."""

    def __init__(
        self,
        status_code: int,
        msg: str,
        type: str,
        loc: Sequence[str | int] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, msg, headers)
        self.msg = msg
        self.type = type
        self.loc = list(loc)


def error_response(
    status_code: int, msg: str, type: str, loc: Sequence[str | int] = (), headers: dict[str, str] | None = None
) -> JSONResponse:
    """The response of one error."""
    return JSONResponse(
        {"detail": [{"loc": list(loc), "msg": msg, "type": type}]}, status_code=status_code, headers=headers
    )


def operator_error(
    status_code: int, msg: str, type: str, headers: dict[str, str] | None = None
) -> HTTPExceptionHandler:
    """The handler of an error of the server's own state, whose message names what the client must not see (the
    server's paths): that goes to the operator's log, one line without a traceback, and the client gets `msg`."""

    async def handler(request: Request, error: Exception) -> JSONResponse:
        logging.getLogger(__name__).error("%s", error)
        return error_response(status_code, msg, type, headers=headers)

    return handler


def _kind(status_code: int) -> str:
    """The type of an error that has none of its own: its status in words, e.g. not_found."""
    try:
        return HTTPStatus(status_code).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def _allowed_methods(request: Request) -> str:
    """The methods the request's path takes, for a 405's Allow header. Starlette names only those of the first
    route of the path, and each method is a route of its own (GET and POST /quotes)."""
    routes = [route for route in request.app.router.routes if isinstance(route, Route)]
    methods = {
        method for route in routes if route.matches(request.scope)[0] is Match.PARTIAL for method in route.methods or ()
    }
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in the one shape: an invalid request (422, FastAPI's field errors less their input),
    an ApiError, Starlette's own HTTP errors (an unknown path, 404; a method a path does not take, 405), and
    anything unforeseen (500, with nothing of its cause)."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if isinstance(error, ApiError):
            return error_response(error.status_code, error.msg, error.type, error.loc, error.headers)
        headers = error.headers
        if error.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        return error_response(error.status_code, str(error.detail), _kind(error.status_code), (), headers)

    @app.exception_handler(Exception)
    async def unforeseen(request: Request, error: Exception) -> JSONResponse:
        # Starlette logs the error and its traceback; the client learns only that it was not its fault.
        return error_response(status.HTTP_500_INTERNAL_SERVER_ERROR, "the server failed to answer", "internal_error")


# What each error status means in this API, for the OpenAPI document.
ERROR_MEANINGS = {
    400: "A request that is not valid HTTP/1.1 (its request line or headers), a Host header that is malformed or "
    "that the server does not answer, a body whose length is given twice (Transfer-Encoding and Content-Length), "
    "or a body that is not UTF-8 JSON.",
    401: "The API key is missing (header X-API-Key).",
    403: "The API key is wrong.",
    404: "No quote has this id.",
    408: "The request body did not arrive in time; the connection is closed.",
    409: "The quote is already listed with another source, gloss or usage examples; or another server is "
    "changing this quote set, or changed it since this one loaded it, so the change was not made.",
    413: "The request body is too large.",
    415: "The body is not sent as JSON (Content-Type: application/json).",
    422: "A field is invalid, or the language cannot be told: `loc` names the field.",
    503: "The queue is full, or a quote change could not be saved and was not made: the disk is full or the shared "
    "quote database cannot be reached (all three: retry after Retry-After seconds), or the server cannot save "
    "changes (its log says why).",
}


def error_statuses(*statuses: int, meanings: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route that may answer these error statuses, each with the one error model; `meanings`
    replaces the usual meaning of a status where the route's differs."""
    meanings = {**ERROR_MEANINGS, **(meanings or {})}
    return {code: {"model": ErrorResponse, "description": meanings[code]} for code in statuses}
