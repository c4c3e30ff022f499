"""Quote list files: UTF-8, tab-separated ``quote<TAB>source[<TAB>gloss]``, one quote a line (the gloss, a short
explanation the quote encoder may read, is optional; a first line ``quote<TAB>source[<TAB>gloss]`` is a header
and skipped, as are blank lines), or JSON lines ``{"quote", "source", "gloss"}``. The built-in bank's files,
the quote lists given to the command line and a data set's glosses are all read here. Every field is one line of
text: control characters, bidirectional controls and tag characters are refused (quoter.text_safety)."""

from __future__ import annotations

from pathlib import Path

from quoter.errors import InputError
from quoter.quote_record import QuoteRecord, has_visible_text
from quoter.text_lines import decoded_lines, json_object
from quoter.text_safety import text_problem, unsafe_text

HEADER = ("quote", "source", "gloss")


def read_quote_tsv(path: str | Path, require_source: bool = True) -> list[QuoteRecord]:
    """Read and check a ``quote<TAB>source[<TAB>gloss]`` file; every row needs a quote (and a source, if
    `require_source`), no quote twice."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 ({error.reason} at byte {error.start})", path) from None
    except OSError as error:
        raise InputError(f"cannot read the quote list: {error.strerror or error}", path) from None
    records: list[QuoteRecord] = []
    seen: dict[str, int] = {}
    # Lines end at line feeds alone, as in decoded_lines: splitlines() would also end them at control characters
    # and separators (U+0085, U+2028, ...) within a field, which are refused instead, and miscount the lines.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        line = line.removeprefix("\ufeff") if number == 1 else line
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and tuple(field.strip().lower() for field in fields) in (HEADER[:2], HEADER):
            continue
        if len(fields) not in (2, 3):
            raise InputError(
                f"expected 2 or 3 tab-separated fields (quote, source[, gloss]), found {len(fields)}", path, number
            )
        records.append(_checked(_record(fields, path, number), seen, path, number, require_source))
    if not records:
        raise InputError("no quotes in the quote list", path)
    return records


def _record(values: list[str], path: Path, number: int) -> QuoteRecord:
    """The record of a line's quote, source and gloss (the last two may be missing), stripped of surrounding
    white space; refused when one of them holds a character no text may, wherever it stands."""
    for field, value in zip(HEADER, values):
        problem = unsafe_text(value)
        if problem is not None:
            raise InputError(problem, path, number, field)
    quote, source, gloss = (*(value.strip() for value in values), "")[:3]
    return QuoteRecord(quote, source, gloss)


def _checked(record: QuoteRecord, seen: dict[str, int], path: Path, number: int, require_source: bool) -> QuoteRecord:
    """`record`, refused without a quote (or a source, if `require_source`), with a source or gloss that holds
    something but shows nothing, or when its quote was seen."""
    if not has_visible_text(record.text):
        raise InputError("empty quote (no letter, number, punctuation mark or symbol)", path, number, "quote")
    if require_source and not record.source:
        raise InputError("empty source", path, number, "source")
    for field, text in (("source", record.source), ("gloss", record.gloss)):
        problem = text_problem(text, field, optional=True)
        if problem is not None:
            raise InputError(problem, path, number, field)
    if record.text in seen:
        raise InputError(f"duplicate quote, first on line {seen[record.text]}", path, number, "quote")
    seen[record.text] = number
    return record


def read_quote_list(path: str | Path) -> list[QuoteRecord]:
    """Read a quote list: JSON lines `{"quote", "source", "gloss"}` (source and gloss optional; other fields
    such as a data file's contexts are ignored) when the name ends in .jsonl or .json, else the bank's TSV
    format with or without its header; no quote twice."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".json"):
        return read_quote_tsv(path, require_source=False)
    records: list[QuoteRecord] = []
    seen: dict[str, int] = {}
    for number, line in decoded_lines(path, "quote list"):
        if not line.strip():
            continue
        expected = '{"quote": text, "source": text, "gloss": text}'
        values = [json_object(line, path, number, expected).get(name, "") for name in HEADER]
        if not all(isinstance(value, str) for value in values):
            raise InputError(f"expected {expected}", path, number)
        records.append(_checked(_record(values, path, number), seen, path, number, False))
    if not records:
        raise InputError("no quotes in the quote list", path)
    return records
