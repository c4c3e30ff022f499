"""The HTTP API's request and response bodies, with the limits that keep one request cheap.

Request fields are strict: `"k": true` or `"k": "5"` is an error, not 1 or 5; `"k": 5.0` is 5, an integer
as JSON Schema counts them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from quoter.languages import Language
from quoter.quote_record import VISIBLE_TEXT_PATTERN

MAX_CONTEXT_CHARS = 2000  # per side; the encoder keeps at most 128 tokens next to the gap anyway
MAX_K = 100
MAX_BATCH = 64
MAX_QUOTE_CHARS = 1000
MAX_SOURCE_CHARS = 500
MAX_PAGE = 100
MAX_SEARCH_CHARS = 200
# Usage examples an added quote may come with: enough to place a quote (the built-in bank has about three a
# quote), and one add stays one encoder call of at most this many contexts.
MAX_EXAMPLES = 20


def _whole_number(value: Any) -> Any:
    """A JSON number without a fraction (5.0, 1e2) as the integer it is; anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# A strict str also refuses a lone surrogate (JSON can spell "\ud800"), which is no text.
Text = Annotated[str, Strict()]
Count = Annotated[int, Strict(), BeforeValidator(_whole_number)]


class RecommendRequest(BaseModel):
    """A context: the text before the gap and after it (empty or left out for autocomplete)."""

    left: Text = Field(max_length=MAX_CONTEXT_CHARS, description="Text before the gap.")
    right: Text = Field("", max_length=MAX_CONTEXT_CHARS, description="Text after the gap; empty for left-only.")
    lang: Language | None = Field(None, description="Bundle language; guessed from the text when left out.")
    k: Count = Field(10, ge=1, le=MAX_K, description="How many quotes to return.")


class RecommendBatchRequest(BaseModel):
    """Several contexts at once, answered in order."""

    requests: list[RecommendRequest] = Field(min_length=1, max_length=MAX_BATCH)


class QuoteOut(BaseModel):
    """A listed quote."""

    id: int
    quote: str
    source: str


class RecommendationOut(QuoteOut):
    """A recommended quote: its score, its softmax probability over the whole quote set of its bank, and the
    bank (language) it comes from."""

    score: float = Field(
        description="The bank's score: the inner product, or a hybrid bundle's fused score. In an answer from both "
        "Chinese banks (langs names two), the quote's standing in its bank instead: that score as a z-score over "
        "the bank's quotes, which compares across the banks."
    )
    probability: float = Field(description="The softmax of the inner product over every quote of the quote's bank.")
    lang: Language = Field(description="The bank the quote comes from.")


class RecommendResponse(BaseModel):
    """The best quotes for a context, best first, and the banks (languages) they were ranked in."""

    lang: Language = Field(description="The bank of the first result; with no result, the first of langs.")
    lang_guessed: bool = Field(description="True when lang was not named and was picked from the text.")
    langs: list[Language] = Field(
        description="The banks ranked: the one named or guessed, or, for Chinese text without lang while both "
        "Chinese banks are hosted, zh and zh-classical, whose quotes are then merged into one list by standing."
    )
    results: list[RecommendationOut]


class RecommendBatchResponse(BaseModel):
    """One response per request, in order."""

    responses: list[RecommendResponse]


class UsageExample(BaseModel):
    """A context in which the quote is used: it stands in the gap between left and right."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["left"], "properties": {"left": {"pattern": VISIBLE_TEXT_PATTERN}}},
                {"required": ["right"], "properties": {"right": {"pattern": VISIBLE_TEXT_PATTERN}}},
            ]
        }
    )

    left: Text = Field(
        "",
        max_length=MAX_CONTEXT_CHARS,
        description="Text before the quote. Left or right must show something: a letter, number, punctuation mark "
        "or symbol.",
    )
    right: Text = Field("", max_length=MAX_CONTEXT_CHARS, description="Text after the quote.")


class QuoteIn(BaseModel):
    """A quote to list."""

    quote: Text = Field(
        min_length=1,
        max_length=MAX_QUOTE_CHARS,
        description="The quote: it must show something, a letter, number, punctuation mark or symbol; white space, "
        "control, zero-width and combining characters alone are refused.",
        json_schema_extra={"pattern": VISIBLE_TEXT_PATTERN},
    )
    source: Text = Field("", max_length=MAX_SOURCE_CHARS)
    gloss: Text = Field(
        "", max_length=MAX_SOURCE_CHARS, description="What the quote means; read with it when the bundle reads glosses."
    )
    lang: Language | None = Field(None, description="Required when several bundles are hosted.")
    examples: list[UsageExample] = Field(
        default_factory=list,
        max_length=MAX_EXAMPLES,
        description="Contexts in which the quote is used, which a hybrid bundle learns from as it learned from "
        "its own quotes' usage examples: CRM and knn know the quote by them, and its vector is pulled towards "
        "them. A bundle that is not hybrid refuses them.",
    )


class QuoteChange(QuoteOut):
    """A quote that was added (created false: the text was already listed under this id, with the same source
    and gloss or none given) or removed."""

    lang: Language
    created: bool = False


class ListedQuote(QuoteOut):
    """A listed quote and how many usage examples it was added with."""

    examples: int = Field(
        description="How many usage examples it was added with (POST /quotes); 0 for the bundle's own quotes, "
        "whose usage examples are part of the bundle."
    )


class QuotePage(BaseModel):
    """A page of the listed quotes that match the search."""

    lang: Language
    total: int = Field(description="How many quotes match.")
    offset: int
    limit: int
    quotes: list[ListedQuote]


class BundleHealth(BaseModel):
    """One hosted bundle."""

    lang: Language
    quotes: int
    model: str | None
    index: str
    int8: bool
    runtime: str


class Health(BaseModel):
    """The server is up; which languages it hosts."""

    status: Literal["ok"] = "ok"
    languages: list[Language]
    bundles: list[BundleHealth]


class ErrorDetail(BaseModel):
    """One thing wrong with a request: where it is (body, query, path or header, then the field; empty for the
    request as a whole), what it is, and its kind for programs. It never repeats what was sent."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorResponse(BaseModel):
    """The body of every error the API answers, whatever its status."""

    detail: list[ErrorDetail]
