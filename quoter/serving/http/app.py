"""The HTTP API: recommend quotes for a context, browse and change the quote sets, and the demo page.

Several bundles are hosted at once, one per language (a bank of quotes each). A request without `lang` is
answered from the bank of its script, and Chinese text from both Chinese banks when both are hosted, merged
into one list (language_choice, chinese_merge). Changing a quote set needs the API key when one is
configured (header X-API-Key), checked before the body is read; without one, only a server on loopback takes
changes, from anyone on its machine (AppConfig.keyless_writes). FastAPI serves the OpenAPI docs at /docs;
the document says what the server hosts (openapi_document) and every status each operation may answer.

Every error has one shape, `{"detail": [{"loc", "msg", "type"}]}` (api_errors), says what is wrong and never
echoes the input back: a request that is not valid HTTP/1.1, a Host header that is malformed or that the
server does not answer, or a body whose length is given twice (400); a body that is too large (413), not
JSON (415, 400), slow to arrive (408) or invalid (422, naming the field; usage examples given to a bundle
that does not learn from them too); a missing or wrong API key (401, 403), or a change asked of a server
beyond loopback without one (403); an unknown quote id (404); a quote already listed with another source,
gloss or usage examples (409); a full queue (503 with Retry-After); and a quote change that was not made:
another server changes the same quote set, or changed it since this one loaded it (409), the disk is full,
the shared quote database cannot be reached or the change before still waits for it (503 with Retry-After),
or the change could not be saved otherwise (503; the operator's log says why). A change whose commit was cut
off is 503 `outcome_unknown` with Retry-After: it may have been made, and retrying it is safe.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response, Security, status
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers

from quoter.bundle import QuoteRecord
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.ranking import Query as Context
from quoter.serving.chinese_merge import merge_banks
from quoter.serving.http.admission import ContextAdmission, ServerBusyError
from quoter.serving.http.answered_hosts import AnsweredHosts
from quoter.serving.http.api_errors import (
    ApiError,
    error_response,
    error_statuses,
    install_error_handlers,
    operator_error,
)
from quoter.serving.http.json_body import HeadCheck, UnambiguousBodies, json_body_route
from quoter.serving.http.language_choice import LanguageChoiceError, choose_hosted_banks
from quoter.serving.http.openapi_document import describe_hosting
from quoter.serving.http.page_security import security_headers
from quoter.serving.http.schemas import (
    MAX_PAGE,
    MAX_SEARCH_CHARS,
    BundleHealth,
    Health,
    ListedQuote,
    QuoteChange,
    QuoteIn,
    QuotePage,
    RecommendationOut,
    RecommendBatchRequest,
    RecommendBatchResponse,
    RecommendRequest,
    RecommendResponse,
)
from quoter.serving.http.server_limits import ServerLimits
from quoter.serving.live.live_quotes import (
    OutcomeUnknownError,
    QuoteConflictError,
    ScoredQuote,
    StoreBusyError,
    StoreUnavailableError,
    UnknownQuoteError,
)
from quoter.serving.live.quote_store import (
    ChangeNotSavedError,
    FolderNotWritableError,
    NoSpaceError,
    SetLockedError,
    StaleCopyError,
)
from quoter.serving.recommender import Recommender

STATIC_FOLDER = Path(__file__).parent / "static"
DEMO_PAGE = STATIC_FOLDER / "index.html"
API_KEY_HEADER = "X-API-Key"
# A full disk is freed by its operator, not within the second a full queue takes to drain.
NO_SPACE_RETRY_AFTER_S = 60
# A database that went away is usually back within a restart's seconds.
STORE_RETRY_AFTER_S = 10
Location = tuple[str | int, ...]


WRITES_CLOSED = "this server takes quote changes only with an API key when it listens beyond loopback, and it has none"


@dataclass(frozen=True)
class AppConfig:
    """api_key: the key that adding and removing quotes needs; keyless_writes: whether, without api_key, they
    are taken from anyone who reaches the server (a loopback server: anyone on its machine) or refused (403,
    a server that listens beyond loopback); limits: what the server accepts."""

    api_key: str | None = None
    keyless_writes: bool = True
    limits: ServerLimits = field(default_factory=ServerLimits)


# Asked for (and documented) only by the routes that need the key, when one is configured.
API_KEY = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="The server's API key.")


class ApiKeyCheck(HeadCheck):
    """The dependency of a route that needs the API key: 401 without it, 403 with another."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key.encode()

    def __call__(self, key: str | None = Security(API_KEY)) -> None:
        self.check(key)

    def check_head(self, headers: Headers) -> None:
        self.check(headers.get(API_KEY_HEADER))

    def check(self, key: str | None) -> None:
        """Refuse a request that sent this key (None: none)."""
        where = ("header", API_KEY_HEADER)
        if key is None:
            message = f"this needs the API key in the {API_KEY_HEADER} header"
            raise ApiError(status.HTTP_401_UNAUTHORIZED, message, "api_key_missing", where)
        # In constant time: how long a comparison takes must not tell how much of a guess was right.
        if not secrets.compare_digest(key.encode(), self.api_key):
            raise ApiError(status.HTTP_403_FORBIDDEN, "wrong API key", "api_key_wrong", where)


class WritesClosed(HeadCheck):
    """The dependency of a route that changes quotes on a server that takes no changes: 403, whatever is sent."""

    def __call__(self) -> None:
        raise ApiError(status.HTTP_403_FORBIDDEN, WRITES_CLOSED, "writes_closed")

    def check_head(self, headers: Headers) -> None:
        self()


def _result(lang: Language, found: ScoredQuote) -> RecommendationOut:
    return RecommendationOut(
        id=found.id,
        quote=found.record.text,
        source=found.record.source,
        score=found.score,
        probability=found.probability,
        lang=lang,
    )


def _answer(
    k: int, banks: tuple[Language, ...], guessed: bool, ranked: Mapping[Language, list[ScoredQuote]]
) -> RecommendResponse:
    """The response to a request from its banks' rankings: one bank's top k as they are, or the top k of several
    banks, each ranked whole, merged by standing."""
    if len(banks) == 1:
        results = [_result(banks[0], found) for found in ranked[banks[0]]]
    else:
        results = [_result(merged.lang, merged.found) for merged in merge_banks(ranked, k)]
    lang = results[0].lang if results else banks[0]
    return RecommendResponse(lang=lang, lang_guessed=guessed, langs=list(banks), results=results)


def create_app(recommenders: Sequence[Recommender], config: AppConfig = AppConfig()) -> FastAPI:
    """The app serving these recommenders, at most one per language."""
    hosted: dict[Language, Recommender] = {}
    for recommender in recommenders:
        if recommender.language in hosted:
            raise QuoterError(f"two bundles for language '{recommender.language.value}'; host one per language")
        hosted[recommender.language] = recommender
    if not hosted:
        raise QuoterError("no bundle to serve")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        for recommender in hosted.values():
            await recommender.close()

    limits = config.limits
    writes_closed = config.api_key is None and not config.keyless_writes
    app = FastAPI(
        title="Quoter",
        summary="Quote recommendation: the quotes that best fit a gap in your text.",
        description=f"Adding and removing quotes is refused here: {WRITES_CLOSED}." if writes_closed else "",
        lifespan=lifespan,
    )
    app.router.route_class = json_body_route(limits.max_body_bytes, limits.body_timeout_s)
    app.add_middleware(AnsweredHosts, hosts=limits.allowed_hosts)
    app.add_middleware(UnambiguousBodies)
    install_error_handlers(app)
    admission = ContextAdmission(limits.max_queued_contexts)
    if STATIC_FOLDER.is_dir():  # the demo page's folder; anything beside index.html is served under /static
        app.mount("/static", StaticFiles(directory=STATIC_FOLDER), name="static")

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            learning = [language for language, recommender in hosted.items() if recommender.fusion is not None]
            app.openapi_schema = describe_hosting(FastAPI.openapi(app), list(hosted), learning)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(ServerBusyError)
    async def busy(request: Request, error: ServerBusyError) -> JSONResponse:
        headers = {"Retry-After": str(limits.retry_after_s)}
        return error_response(status.HTTP_503_SERVICE_UNAVAILABLE, str(error), "busy", headers=headers)

    @app.exception_handler(UnknownQuoteError)
    async def unknown_quote(request: Request, error: UnknownQuoteError) -> JSONResponse:
        return error_response(status.HTTP_404_NOT_FOUND, str(error), "not_found", ("path", "quote_id"))

    # A change the quote store refused: the operator learns where and why, the client what it can do. Another
    # server's hold on the set is a conflict that no retry ends (409); a full disk is freed in time, and a shared
    # database that went away or hangs comes back (503 with Retry-After, also when a change's commit was cut off
    # and its outcome is unknown); a folder that cannot be written, or a cause not known, waits for the operator
    # (503).
    refused_changes = {
        ChangeNotSavedError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the change could not be saved on the server, so it was not made; the operator's log says why",
            "not_saved",
        ),
        FolderNotWritableError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "this server cannot save quote changes, so the change was not made: the folder it keeps them in cannot "
            "be written (its operator can give it one that can, with --state)",
            "not_saved",
        ),
        NoSpaceError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the server has no disk space left to save the change, so it was not made; retry later",
            "no_space",
            {"Retry-After": str(NO_SPACE_RETRY_AFTER_S)},
        ),
        StoreUnavailableError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the quote database cannot be reached, so the change was not made; recommendations go on from the quotes "
            "loaded, retry the change later",
            "store_unavailable",
            {"Retry-After": str(STORE_RETRY_AFTER_S)},
        ),
        StoreBusyError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the change before this one still waits for the quote store, so this one was not made; recommendations go "
            "on from the quotes loaded, retry the change later",
            "store_busy",
            {"Retry-After": str(STORE_RETRY_AFTER_S)},
        ),
        OutcomeUnknownError: operator_error(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the connection to the quote database was lost as the change was committed: it may have been made or not; "
            "retrying the same request is safe (an add already made answers its id, a removal already made 404)",
            "outcome_unknown",
            {"Retry-After": str(STORE_RETRY_AFTER_S)},
        ),
        SetLockedError: operator_error(
            status.HTTP_409_CONFLICT,
            "another server is changing this quote set, so this one cannot: the change was not made; make it "
            "through that server",
            "locked",
        ),
        StaleCopyError: operator_error(
            status.HTTP_409_CONFLICT,
            "another server changed this quote set since this one loaded it, so the change was not made; this "
            "server must be restarted to load those changes",
            "out_of_date",
        ),
    }
    for refused, handler in refused_changes.items():
        app.add_exception_handler(refused, handler)

    @app.exception_handler(QuoteConflictError)
    async def conflict(request: Request, error: QuoteConflictError) -> JSONResponse:
        return error_response(status.HTTP_409_CONFLICT, str(error), "listed_differently", ("body", error.field))

    @app.exception_handler(InputError)
    async def bad_input(request: Request, error: InputError) -> JSONResponse:
        loc = ("body",) if error.field is None else ("body", error.field)
        return error_response(status.HTTP_422_UNPROCESSABLE_CONTENT, error.message, "invalid", loc)

    # What adding and removing quotes needs: the key, nothing (a loopback server without one), or what no
    # request has (a server beyond loopback without one).
    writes_need, key_statuses, meanings = [], (), {}
    if config.api_key is not None:
        writes_need, key_statuses = [Security(ApiKeyCheck(config.api_key))], (401, 403)
    elif writes_closed:
        writes_need, key_statuses, meanings = [Depends(WritesClosed())], (403,), {403: f"Refused: {WRITES_CLOSED}."}

    def choose(lang: Language | None, texts: list[str], loc: Location) -> tuple[tuple[Language, ...], bool]:
        """The banks of a request (see choose_hosted_banks); a 422 at `loc` when they cannot be chosen."""
        try:
            return choose_hosted_banks(lang, hosted, texts)
        except LanguageChoiceError as error:
            raise ApiError(status.HTTP_422_UNPROCESSABLE_CONTENT, str(error), "language", loc) from None

    def named(lang: Language | None, loc: Location) -> Recommender:
        """The bundle of a request that changes or lists quotes: no guessing, only one language may go unnamed."""
        if lang is None and len(hosted) > 1:
            names = ", ".join(language.value for language in hosted)
            message = f"several languages are hosted ({names}); name lang"
            raise ApiError(status.HTTP_422_UNPROCESSABLE_CONTENT, message, "language", loc)
        [bank], _ = choose(lang, [], loc)
        return hosted[bank]

    def depth(request: RecommendRequest, bank: Language, banks: tuple[Language, ...]) -> int:
        """How many quotes a bank ranks for a request: its k, or every quote when its answer is merged with
        another bank's (a standing is taken over the whole bank)."""
        return request.k if len(banks) == 1 else max(len(hosted[bank].quotes), 1)

    async def ranked_in(language: Language, items: list[tuple[RecommendRequest, int]]) -> list[list[ScoredQuote]]:
        return await hosted[language].recommend_async([(Context(r.left, r.right), k) for r, k in items])

    async def recommend_all(requests: Sequence[RecommendRequest], locs: Sequence[Location]) -> list[RecommendResponse]:
        """The responses in order; every request's banks are chosen (a 422 at the request's loc if they cannot
        be), and the queue checked, before any work is queued."""
        choices = [choose(r.lang, [r.left, r.right], loc) for r, loc in zip(requests, locs)]
        by_bank: dict[Language, list[int]] = {}
        for number, (banks, _) in enumerate(choices):
            for bank in banks:
                by_bank.setdefault(bank, []).append(number)
        # A context ranked in two banks counts once: the limit is on the contexts clients send, and every batch
        # the API takes must fit in it.
        with admission.admit(len(requests)):
            found = await asyncio.gather(
                *(
                    ranked_in(bank, [(requests[n], depth(requests[n], bank, choices[n][0])) for n in numbers])
                    for bank, numbers in by_bank.items()
                )
            )
        ranked: dict[tuple[int, Language], list[ScoredQuote]] = {}
        for (bank, numbers), results in zip(by_bank.items(), found):
            ranked.update(((n, bank), result) for n, result in zip(numbers, results))
        return [
            _answer(requests[n].k, banks, guessed, {bank: ranked[n, bank] for bank in banks})
            for n, (banks, guessed) in enumerate(choices)
        ]

    @app.get("/", include_in_schema=False)
    def demo_page() -> HTMLResponse:
        if not DEMO_PAGE.is_file():
            raise ApiError(status.HTTP_404_NOT_FOUND, "the demo page is not installed", "not_found")
        page = DEMO_PAGE.read_text(encoding="utf-8")
        return HTMLResponse(page, headers=security_headers(page))

    # Load balancers and uptime checks may ask with HEAD: GET's answer without its body (uvicorn drops it).
    @app.api_route("/health", methods=["HEAD"], include_in_schema=False)
    @app.get("/health", responses=error_statuses(400))
    async def health() -> Health:
        """The hosted languages and their quote sets."""
        bundles = [
            BundleHealth(
                lang=language,
                quotes=len(recommender.quotes),
                model=recommender.info.get("model"),
                index=recommender.config.index.kind.value + (" (gpu)" if recommender.quotes.index.on_gpu else ""),
                int8=recommender.config.int8,
                runtime=recommender.runtime.name,
            )
            for language, recommender in hosted.items()
        ]
        return Health(languages=list(hosted), bundles=bundles)

    recommend_errors = error_statuses(400, 408, 413, 415, 422, 503)

    @app.post("/recommend", responses=recommend_errors)
    async def recommend(request: RecommendRequest) -> RecommendResponse:
        """The best k quotes for the gap between left and right, best first; Chinese text without lang is
        ranked in both Chinese banks when both are hosted, in one list (see langs and each result's lang)."""
        [response] = await recommend_all([request], [("body", "lang")])
        return response

    @app.post("/recommend/batch", responses=recommend_errors)
    async def recommend_batch(batch: RecommendBatchRequest) -> RecommendBatchResponse:
        """Recommendations for several contexts, in order, each answered as /recommend answers it; each may name
        its own language."""
        locs = [("body", "requests", number, "lang") for number in range(len(batch.requests))]
        return RecommendBatchResponse(responses=await recommend_all(batch.requests, locs))

    @app.get("/quotes", responses=error_statuses(400, 422))
    def list_quotes(
        lang: Language | None = None,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
        q: Annotated[str, Query(max_length=MAX_SEARCH_CHARS, description="Text the quote or source contains.")] = "",
    ) -> QuotePage:
        """Browse a quote set in id order, optionally only quotes whose text or source contains q."""
        recommender = named(lang, ("query", "lang"))
        total, page = recommender.quotes.browse(offset, limit, q)
        quotes = [
            ListedQuote(id=i, quote=record.text, source=record.source, examples=recommender.quotes.example_count(i))
            for i, record in page
        ]
        return QuotePage(lang=recommender.language, total=total, offset=offset, limit=limit, quotes=quotes)

    already_listed = {
        status.HTTP_200_OK: {
            "model": QuoteChange,
            "description": "The quote was already listed (with the same source, gloss and usage examples, or none "
            "given): its id.",
        }
    }

    @app.post(
        "/quotes",
        dependencies=writes_need,
        status_code=status.HTTP_201_CREATED,
        responses={
            **already_listed,
            **error_statuses(400, *key_statuses, 408, 409, 413, 415, 422, 503, meanings=meanings),
        },
    )
    def add_quote(body: QuoteIn, response: Response) -> QuoteChange:
        """List a quote (encoded now), with the usage examples it is used in when the bundle is hybrid (422
        otherwise). A quote already listed is not listed twice: its id comes back with 200, or 409 when the add
        gives it another source, gloss or examples than it has (remove it first to change them)."""
        recommender = named(body.lang, ("body", "lang"))
        examples = [Context(example.left, example.right) for example in body.examples]
        quote_id, created = recommender.quotes.add(QuoteRecord(body.quote, body.source, body.gloss), examples)
        if not created:
            response.status_code = status.HTTP_200_OK
        record = recommender.quotes.get(quote_id)
        return QuoteChange(
            id=quote_id, quote=record.text, source=record.source, lang=recommender.language, created=created
        )

    @app.delete(
        "/quotes/{quote_id}",
        dependencies=writes_need,
        responses=error_statuses(400, *key_statuses, 404, 409, 422, 503, meanings=meanings),
    )
    def remove_quote(quote_id: int, lang: Language | None = None) -> QuoteChange:
        """Unlist a quote; it is never recommended again and its id is not reused."""
        recommender = named(lang, ("query", "lang"))
        record = recommender.quotes.remove(quote_id)
        return QuoteChange(id=quote_id, quote=record.text, source=record.source, lang=recommender.language)

    return app
