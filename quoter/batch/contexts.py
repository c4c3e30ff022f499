"""The contexts of a `quoter batch` input file: JSON lines ({"left", "right", "id"}) or TSV (left<TAB>right, or
a QuoteR file's left<TAB>quote<TAB>right), each with its line number for errors and resuming."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quoter.errors import InputError
from quoter.ranking import Query
from quoter.text_lines import check_text, decoded_lines, json_object

JSONL_SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True)
class BatchContext:
    """A context of the input: its line number, the id the input gave it (if any), the query."""

    line: int
    id: Any
    query: Query


def _jsonl_context(text: str, path: Path, number: int) -> BatchContext:
    expected = 'a JSON object {"left", "right", "id"} with at least "left"'
    record = json_object(text, path, number, expected)
    if "left" not in record:
        raise InputError(f"expected {expected}", path=path, line=number)
    for field in ("left", "right"):
        if not isinstance(record.get(field, ""), str):
            raise InputError("expected a string", path=path, line=number, field=field)
        check_text(record.get(field, ""), path, number, field)
    return BatchContext(number, record.get("id"), Query(record["left"], record.get("right", "")))


def _tsv_context(text: str, path: Path, number: int) -> BatchContext:
    fields = text.split("\t")
    if len(fields) == 2:
        return BatchContext(number, None, Query(fields[0], fields[1]))
    if len(fields) == 3:  # a QuoteR file: left, quote, right
        return BatchContext(number, None, Query(fields[0], fields[2]))
    raise InputError(
        f"expected left<TAB>right or left<TAB>quote<TAB>right, found {len(fields)} field(s)", path=path, line=number
    )


def read_contexts(path: str | Path) -> list[BatchContext]:
    """Every context of a JSONL file ({"left", "right", "id"}) or a TSV file (by suffix); blank lines are
    skipped."""
    path = Path(path)
    parse = _jsonl_context if path.suffix.lower() in JSONL_SUFFIXES else _tsv_context
    contexts = [parse(text, path, number) for number, text in decoded_lines(path, "input file") if text.strip()]
    if not contexts:
        raise InputError("the input file has no contexts", path=path)
    return contexts
