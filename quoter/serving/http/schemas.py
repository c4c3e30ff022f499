"""The HTTP API's request and response bodies, with the limits that keep one request cheap.

Request fields are strict: `"k": true` or `"k": "5"` is an error, not 1 or 5; `"k": 5.0` is 5, an integer
as JSON Schema counts them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator
from pydantic_core import PydanticCustomError

from quoter.languages import Language
from quoter.quote_record import VISIBLE_TEXT_PATTERN, has_visible_text
from quoter.text_safety import MULTILINE_CHARACTER, ONE_LINE_CHARACTER, text_problem, unsafe_text

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

# What every text field refuses (quoter.text_safety), said in its description, and as JSON Schema patterns:
# a text of several lines, and a one-line text that must show something (or may also be empty).
ONE_LINE_RULE = (
    "It is one line: control characters (tab, line breaks, the ESC of ANSI escape sequences), bidirectional "
    "embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) and tag characters (U+E0000-U+E007F) are "
    "refused."
)
MULTILINE_RULE = (
    "It may hold tabs and line breaks (line feed, carriage return); other control characters (the ESC of ANSI "
    "escape sequences), bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) and tag "
    "characters (U+E0000-U+E007F) are refused."
)
MULTILINE_PATTERN = f"^{MULTILINE_CHARACTER}*$"
VISIBLE_LINE_PATTERN = f"^{ONE_LINE_CHARACTER}*{VISIBLE_TEXT_PATTERN}{ONE_LINE_CHARACTER}*$"
OPTIONAL_LINE_PATTERN = f"^(?:{ONE_LINE_CHARACTER}*{VISIBLE_TEXT_PATTERN}{ONE_LINE_CHARACTER}*)?$"
# Neither left nor right of a context shows anything: there is nothing to recommend for.
NO_CONTEXT = "there is no text around the gap: left or right needs a letter, number, punctuation mark or symbol"


def _checked_line(field: str, optional: bool = False) -> AfterValidator:
    """The validator of a one-line text field: a 422 with text_problem's message (which does not repeat it)."""

    def check(value: str) -> str:
        problem = text_problem(value, field, optional=optional)
        if problem is not None:
            raise PydanticCustomError("invalid_text", problem)
        return value

    return AfterValidator(check)


def _safe_lines(value: str) -> str:
    """A side of a context, refused for a character no text may hold; whether the context as a whole shows
    something is its model's to check."""
    problem = unsafe_text(value, multiline=True)
    if problem is not None:
        raise PydanticCustomError("invalid_text", problem)
    return value


ContextText = Annotated[Text, AfterValidator(_safe_lines)]


def _context_side(description: str, default: Any = ...) -> Any:
    """The field of a side of a context or usage example (`...`: required): text of several lines, at most
    MAX_CONTEXT_CHARS characters, that holds no character MULTILINE_RULE refuses."""
    return Field(
        default,
        max_length=MAX_CONTEXT_CHARS,
        description=f"{description} {MULTILINE_RULE}",
        json_schema_extra={"pattern": MULTILINE_PATTERN},
    )


# Left or right shows something: a letter, number, punctuation mark or symbol.
SHOWING_SIDE = [
    {"required": [side], "properties": {side: {"pattern": VISIBLE_TEXT_PATTERN}}} for side in ("left", "right")
]


class RecommendRequest(BaseModel):
    """A context: the text before the gap and after it (empty or left out for autocomplete). Left or right must
    show something, a letter, number, punctuation mark or symbol: a context of white space, control, zero-width
    or combining characters alone is refused."""

    # In allOf: the OpenAPI document of a server hosting several languages gives the model an anyOf of its own
    # (openapi_document: lang, or a letter of a hosted script).
    model_config = ConfigDict(json_schema_extra={"allOf": [{"anyOf": SHOWING_SIDE}]})

    left: ContextText = _context_side("Text before the gap.")
    right: ContextText = _context_side("Text after the gap; empty for left-only.", "")
    lang: Language | None = Field(None, description="Bundle language; guessed from the text when left out.")
    k: Count = Field(10, ge=1, le=MAX_K, description="How many quotes to return.")

    @model_validator(mode="after")
    def _around_the_gap(self) -> RecommendRequest:
        """Refuse a context that shows nothing (422 at the request: the body, or its number in a batch)."""
        if not (has_visible_text(self.left) or has_visible_text(self.right)):
            raise PydanticCustomError("no_context", NO_CONTEXT)
        return self


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

    model_config = ConfigDict(json_schema_extra={"anyOf": SHOWING_SIDE})

    left: ContextText = _context_side(
        "Text before the quote. Left or right must show something: a letter, number, punctuation mark or symbol.", ""
    )
    right: ContextText = _context_side("Text after the quote.", "")


class QuoteIn(BaseModel):
    """A quote to list."""

    quote: Annotated[Text, _checked_line("quote")] = Field(
        min_length=1,
        max_length=MAX_QUOTE_CHARS,
        description="The quote: it must show something, a letter, number, punctuation mark or symbol; white space, "
        f"control, zero-width and combining characters alone are refused. {ONE_LINE_RULE}",
        json_schema_extra={"pattern": VISIBLE_LINE_PATTERN},
    )
    source: Annotated[Text, _checked_line("source", optional=True)] = Field(
        "",
        max_length=MAX_SOURCE_CHARS,
        description=f"Who said or wrote it, where; empty, or showing something as the quote must. {ONE_LINE_RULE}",
        json_schema_extra={"pattern": OPTIONAL_LINE_PATTERN},
    )
    gloss: Annotated[Text, _checked_line("gloss", optional=True)] = Field(
        "",
        max_length=MAX_SOURCE_CHARS,
        description="What the quote means; read with it when the bundle reads glosses. Empty, or showing something "
        f"as the quote must. {ONE_LINE_RULE}",
        json_schema_extra={"pattern": OPTIONAL_LINE_PATTERN},
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
