"""The OpenAPI document of a server, told what the server hosts, so that it says which requests are valid
there: `lang` names a hosted language; when several are hosted, listing and changing quotes need `lang`, and
a context needs `lang` unless its text has a letter of a hosted script (language_choice), and Chinese text
without it is ranked in both Chinese banks when both are hosted (chinese_merge); a quote may be added with
usage examples only to a hybrid bundle (live_quotes)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from quoter.languages import CHINESE, Language
from quoter.serving.http.language_choice import hosted_letters_pattern

LANGUAGE = {"$ref": "#/components/schemas/Language"}
# The operations that list or change one language's quotes, whose `lang` query parameter names it.
QUOTE_SET_OPERATIONS = (("/quotes", "get"), ("/quotes/{quote_id}", "delete"))


def _require_lang(schema: dict[str, Any], description: str) -> None:
    """Make an object schema's `lang` property a required, non-null language."""
    schema["properties"]["lang"] = {**LANGUAGE, "description": description}
    schema["required"] = [*schema.get("required", []), "lang"]


def _limit_examples(quote: dict[str, Any], hosted: Collection[Language], learning: Collection[Language]) -> None:
    """Narrow the QuoteIn schema `quote` to the hosted bundles that learn from usage examples: none (examples
    must be empty), or only some (then named by lang, which several hosted languages make required)."""
    examples = quote["properties"]["examples"]
    if not learning:
        examples["maxItems"] = 0
        examples["description"] += " No bundle hosted here is hybrid: leave them out."
    elif set(hosted) - set(learning):
        names = [language.value for language in hosted if language in learning]
        examples["description"] += f" The hybrid bundles hosted here: {', '.join(names)}."
        quote["anyOf"] = [{"properties": {"examples": {"maxItems": 0}}}, {"properties": {"lang": {"enum": names}}}]


def describe_hosting(
    document: dict[str, Any], hosted: Collection[Language], learning: Collection[Language]
) -> dict[str, Any]:
    """The document (FastAPI's, changed in place) narrowed to a server hosting these languages, of which those
    in `learning` (hybrid bundles) learn from the usage examples a quote is added with."""
    schemas = document["components"]["schemas"]
    schemas["Language"]["enum"] = [language.value for language in hosted]
    _limit_examples(schemas["QuoteIn"], hosted, learning)
    if len(hosted) < 2:
        return document
    _require_lang(schemas["QuoteIn"], "The language of the quote set; several are hosted.")
    for path, method in QUOTE_SET_OPERATIONS:
        for parameter in document["paths"][path][method]["parameters"]:
            if parameter["name"] == "lang":
                parameter.update(required=True, schema=LANGUAGE)
    letter = {"type": "string", "pattern": hosted_letters_pattern(hosted)}
    request = schemas["RecommendRequest"]
    request["description"] += (
        " Several languages are hosted: without lang, the text must have a letter of a hosted language's "
        "script, which picks the language (lang_guessed)."
    )
    if all(language in hosted for language in CHINESE):
        request["description"] += (
            " Chinese text is ranked in both Chinese banks, zh and zh-classical, and answered in one list: each "
            "result's lang says its bank, and its score is its standing in that bank."
        )
    request["anyOf"] = [
        {"required": ["lang"], "properties": {"lang": LANGUAGE}},
        {"properties": {"left": letter}},
        {"required": ["right"], "properties": {"right": letter}},
    ]
    return document
