"""The HTTP API: recommend quotes for a context, browse and change the quote sets, and the demo page.

Several bundles are hosted at once, one per language. Changing a quote set needs the API key when one is
configured (header X-API-Key). FastAPI serves the OpenAPI docs at /docs.

A request is refused with an error that says what is wrong and never echoes the input back: a Host header the
server does not answer (400, Starlette's "Invalid host header"), and in JSON a body that is too large (413), not
JSON (415, 400) or invalid (422, naming the field), and a full queue (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from quoter.bundle import QuoteRecord
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.ranking import Query as Context
from quoter.serving.admission import ContextAdmission, ServerBusyError
from quoter.serving.json_body import json_body_route
from quoter.serving.language_choice import LanguageChoiceError, choose_hosted_language
from quoter.serving.live_quotes import ScoredQuote, UnknownQuoteError
from quoter.serving.page_security import security_headers
from quoter.serving.recommender import Recommender
from quoter.serving.schemas import (
    MAX_PAGE,
    MAX_SEARCH_CHARS,
    BundleHealth,
    Health,
    QuoteChange,
    QuoteIn,
    QuoteOut,
    QuotePage,
    RecommendationOut,
    RecommendBatchRequest,
    RecommendBatchResponse,
    RecommendRequest,
    RecommendResponse,
)
from quoter.serving.server_limits import ServerLimits

STATIC_FOLDER = Path(__file__).parent / "static"
DEMO_PAGE = STATIC_FOLDER / "index.html"
API_KEY_HEADER = "X-API-Key"
BUSY = {status.HTTP_503_SERVICE_UNAVAILABLE: {"description": "The queue is full; retry after Retry-After seconds."}}


@dataclass(frozen=True)
class AppConfig:
    """api_key: the key that adding and removing quotes needs; None leaves them open (a loopback server);
    limits: what the server accepts."""

    api_key: str | None = None
    limits: ServerLimits = field(default_factory=ServerLimits)


def _results(found: list[ScoredQuote]) -> list[RecommendationOut]:
    return [
        RecommendationOut(
            id=q.id, quote=q.record.text, source=q.record.source, score=q.score, probability=q.probability
        )
        for q in found
    ]


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
    app = FastAPI(
        title="Quoter",
        summary="Quote recommendation: the quotes that best fit a gap in your text.",
        lifespan=lifespan,
    )
    app.router.route_class = json_body_route(limits.max_body_bytes)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(limits.allowed_hosts), www_redirect=False)
    admission = ContextAdmission(limits.max_queued_contexts)
    if STATIC_FOLDER.is_dir():  # the demo page's folder; anything beside index.html is served under /static
        app.mount("/static", StaticFiles(directory=STATIC_FOLDER), name="static")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        # The input is left out: it may be megabytes long, or not even encodable (NaN, a lone surrogate).
        errors = [{"type": e["type"], "loc": e["loc"], "msg": e["msg"]} for e in error.errors()]
        return JSONResponse({"detail": errors}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(ServerBusyError)
    async def busy(request: Request, error: ServerBusyError) -> JSONResponse:
        headers = {"Retry-After": str(limits.retry_after_s)}
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)

    @app.exception_handler(LanguageChoiceError)
    async def language_error(request: Request, error: LanguageChoiceError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(UnknownQuoteError)
    async def unknown_quote(request: Request, error: UnknownQuoteError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_404_NOT_FOUND)

    @app.exception_handler(InputError)
    async def bad_input(request: Request, error: InputError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)

    def check_api_key(key: Annotated[str | None, Header(alias=API_KEY_HEADER)] = None) -> None:
        if config.api_key is None:
            return
        if key is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, f"this needs the API key in the {API_KEY_HEADER} header")
        if not secrets.compare_digest(key.encode(), config.api_key.encode()):
            raise HTTPException(status.HTTP_403_FORBIDDEN, "wrong API key")

    def named(lang: Language | None) -> Recommender:
        """The bundle of a request that changes or lists quotes: no guessing, only one language may go unnamed."""
        if lang is None and len(hosted) > 1:
            names = ", ".join(language.value for language in hosted)
            raise LanguageChoiceError(f"several languages are hosted ({names}); name lang")
        language, _ = choose_hosted_language(lang, hosted, [])
        return hosted[language]

    async def ranked_in(language: Language, requests: list[RecommendRequest]) -> list[list[ScoredQuote]]:
        return await hosted[language].recommend_async([(Context(r.left, r.right), r.k) for r in requests])

    async def recommend_all(requests: Sequence[RecommendRequest]) -> list[RecommendResponse]:
        """The responses in order; every language is chosen, and the queue checked, before any work is queued."""
        languages = [choose_hosted_language(r.lang, hosted, [r.left, r.right]) for r in requests]
        by_language: dict[Language, list[int]] = {}
        for number, (language, _) in enumerate(languages):
            by_language.setdefault(language, []).append(number)
        with admission.admit(len(requests)):
            found = await asyncio.gather(
                *(ranked_in(language, [requests[n] for n in numbers]) for language, numbers in by_language.items())
            )
        ranked: dict[int, list[ScoredQuote]] = {}
        for numbers, results in zip(by_language.values(), found):
            ranked.update(zip(numbers, results))
        return [
            RecommendResponse(lang=language, lang_guessed=guessed, results=_results(ranked[n]))
            for n, (language, guessed) in enumerate(languages)
        ]

    @app.get("/", include_in_schema=False)
    def demo_page() -> HTMLResponse:
        if not DEMO_PAGE.is_file():
            raise HTTPException(status.HTTP_404_NOT_FOUND, "the demo page is not installed")
        page = DEMO_PAGE.read_text(encoding="utf-8")
        return HTMLResponse(page, headers=security_headers(page))

    @app.get("/health")
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

    @app.post("/recommend", responses=BUSY)
    async def recommend(request: RecommendRequest) -> RecommendResponse:
        """The best k quotes for the gap between left and right, best first."""
        [response] = await recommend_all([request])
        return response

    @app.post("/recommend/batch", responses=BUSY)
    async def recommend_batch(batch: RecommendBatchRequest) -> RecommendBatchResponse:
        """Recommendations for several contexts, in order; each may name its own language."""
        return RecommendBatchResponse(responses=await recommend_all(batch.requests))

    @app.get("/quotes")
    def list_quotes(
        lang: Language | None = None,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
        q: Annotated[str, Query(max_length=MAX_SEARCH_CHARS, description="Text the quote or source contains.")] = "",
    ) -> QuotePage:
        """Browse a quote set in id order, optionally only quotes whose text or source contains q."""
        recommender = named(lang)
        total, page = recommender.quotes.browse(offset, limit, q)
        quotes = [QuoteOut(id=i, quote=record.text, source=record.source) for i, record in page]
        return QuotePage(lang=recommender.language, total=total, offset=offset, limit=limit, quotes=quotes)

    @app.post("/quotes", dependencies=[Depends(check_api_key)], status_code=status.HTTP_201_CREATED)
    def add_quote(body: QuoteIn, response: Response) -> QuoteChange:
        """List a quote (encoded now); a quote already listed is not listed twice: its id comes back, 200."""
        recommender = named(body.lang)
        quote_id, created = recommender.quotes.add(QuoteRecord(body.quote, body.source, body.gloss))
        if not created:
            response.status_code = status.HTTP_200_OK
        record = recommender.quotes.get(quote_id)
        return QuoteChange(
            id=quote_id, quote=record.text, source=record.source, lang=recommender.language, created=created
        )

    @app.delete("/quotes/{quote_id}", dependencies=[Depends(check_api_key)])
    def remove_quote(quote_id: int, lang: Language | None = None) -> QuoteChange:
        """Unlist a quote; it is never recommended again and its id is not reused."""
        recommender = named(lang)
        record = recommender.quotes.remove(quote_id)
        return QuoteChange(id=quote_id, quote=record.text, source=record.source, lang=recommender.language)

    return app
