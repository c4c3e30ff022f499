"""Read the builder's inputs that name quotes: quote lists (TSV) and example sentences (JSONL)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from quoter.errors import InputError
from quoter.text_lines import decoded_lines, json_object

QUOTE_COLUMNS = ("quote", "source")
# Fields an examples record may name its quote by: our own name, or the idiom dictionaries' one.
EXAMPLE_QUOTE_FIELDS = ("quote", "idiom")
WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class QuoteEntry:
    """A quote as given by the user, with the work or author it comes from ('' when unknown)."""

    text: str
    source: str
    origin: str  # file:line, for messages


@dataclass(frozen=True)
class ExampleSentence:
    """An example sentence of a quote (an idiom dictionary's): a placeholder marks where it cites the quote, or
    the quote is written out."""

    quote: QuoteEntry
    text: str  # with the placeholder still in place
    line: int  # of the examples file


def cited_text(sentence: str, placeholder: str, quote: str) -> tuple[str, list[tuple[int, int]]]:
    """An example sentence with `quote` in place of each `placeholder`, and the [start, end) of each of them."""
    pieces = sentence.split(placeholder)
    cited: list[tuple[int, int]] = []
    position = 0
    for piece in pieces[:-1]:
        position += len(piece)
        cited.append((position, position + len(quote)))
        position += len(quote)
    return quote.join(pieces), cited


def collapse_whitespace(text: str) -> str:
    """One space for every run of white space (tabs and newlines included), none at the ends."""
    return WHITESPACE.sub(" ", text).strip()


def read_quote_list(path: Path) -> list[QuoteEntry]:
    """Read a quote list: a header naming the columns `quote` and optionally `source`, then one quote a line."""
    lines = decoded_lines(path)
    header = next(lines, None)
    if header is None:
        raise InputError("the quote list is empty; expected a header line 'quote<TAB>source'", path=path)
    columns = header[1].split("\t")
    for column in columns:
        if column not in QUOTE_COLUMNS:
            raise InputError(
                f"unknown column '{column}'; a quote list has the columns {' and '.join(QUOTE_COLUMNS)}",
                path=path,
                line=1,
                field=column,
            )
    if "quote" not in columns:
        raise InputError("the header has no 'quote' column", path=path, line=1)
    quote_at = columns.index("quote")
    source_at = columns.index("source") if "source" in columns else None
    entries = []
    for number, line in lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise InputError(
                f"expected {len(columns)} tab-separated fields ({', '.join(columns)}), found {len(fields)}",
                path=path,
                line=number,
            )
        text = collapse_whitespace(fields[quote_at])
        if not text:
            raise InputError("the quote is empty", path=path, line=number, field="quote")
        source = collapse_whitespace(fields[source_at]) if source_at is not None else ""
        entries.append(QuoteEntry(text=text, source=source, origin=f"{path}:{number}"))
    return entries


def read_examples(path: Path, attribution_mark: str) -> tuple[list[QuoteEntry], list[ExampleSentence]]:
    """Read a JSONL file of quotes with example sentences.

    Each line is an object with the quote (`quote` or `idiom`), optionally `source`, and `example`: a sentence
    in which a placeholder (`～`) stands where the quote was cited (some write the quote out instead). Everything
    from `attribution_mark` on (the dictionaries' `★《work》`) names the citing work and is not part of the
    sentence. Every record's quote joins the quote set, and every example that is not empty is a sentence.
    """
    quotes: list[QuoteEntry] = []
    examples: list[ExampleSentence] = []
    for number, line in decoded_lines(path):
        if not line.strip():
            continue
        record = json_object(line, path, number, "a JSON object with a quote and an example")
        quote_field = next((name for name in EXAMPLE_QUOTE_FIELDS if name in record), None)
        if quote_field is None:
            raise InputError(
                f"no quote: expected one of the fields {', '.join(EXAMPLE_QUOTE_FIELDS)}", path=path, line=number
            )
        values = {}
        for name in (quote_field, "source", "example"):
            value = record.get(name, "")
            if not isinstance(value, str):
                raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=number, field=name)
            values[name] = value
        text = collapse_whitespace(values[quote_field])
        if not text:
            raise InputError("the quote is empty", path=path, line=number, field=quote_field)
        quote = QuoteEntry(text=text, source=collapse_whitespace(values["source"]), origin=f"{path}:{number}")
        quotes.append(quote)
        sentence = collapse_whitespace(values["example"].split(attribution_mark, 1)[0])
        if sentence:
            examples.append(ExampleSentence(quote=quote, text=sentence, line=number))
    return quotes, examples
