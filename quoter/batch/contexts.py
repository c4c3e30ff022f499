"""The contexts of a `quoter batch` input file: JSON lines ({"left", "right", "id"}), TSV (left<TAB>right, or
a QuoteR file's left<TAB>quote<TAB>right) or Parquet (columns left, right, id), each with its line number (a
Parquet file's row number, from 1) for errors and resuming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quoter.errors import InputError
from quoter.quote_record import has_visible_text
from quoter.ranking import Query
from quoter.text_lines import check_text, decoded_lines, json_object

JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIX = ".parquet"
PARQUET_COLUMNS = ("left", "right", "id")
# The ids a Parquet column may hold: what a JSON lines input's "id" holds and the output writes back as it is.
PARQUET_IDS = (str, int, float, bool)


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
    identifier = _check_id(record.get("id"), path, number)
    return BatchContext(number, identifier, Query(record["left"], record.get("right", "")))


def _tsv_context(text: str, path: Path, number: int) -> BatchContext:
    fields = text.split("\t")
    if len(fields) == 2:
        return BatchContext(number, None, Query(fields[0], fields[1]))
    if len(fields) == 3:  # a QuoteR file: left, quote, right
        return BatchContext(number, None, Query(fields[0], fields[2]))
    raise InputError(
        f"expected left<TAB>right or left<TAB>quote<TAB>right, found {len(fields)} field(s)", path=path, line=number
    )


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet file as dicts of its columns left, right and id (those it has), streamed."""
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise InputError("reading Parquet needs pyarrow: pip install 'quoter[scale]'", path=path) from None
    if not path.is_file():
        raise InputError("input file not found", path=path)
    try:
        table = parquet.ParquetFile(path)
        names = table.schema_arrow.names
        if "left" not in names:
            raise InputError(f"expected a column 'left' (and 'right', 'id'); found {', '.join(names) or 'none'}", path)
        for batch in table.iter_batches(columns=[name for name in PARQUET_COLUMNS if name in names]):
            yield from batch.to_pylist()
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError: not Parquet, or damaged
        raise InputError(f"cannot read it as Parquet: {error}", path=path) from None


def _parquet_context(row: dict[str, Any], path: Path, number: int) -> BatchContext:
    # A null right context is none, as a JSON line without "right" has none.
    texts = {"left": row["left"], "right": "" if row.get("right") is None else row["right"]}
    for field, text in texts.items():
        if not isinstance(text, str):
            raise InputError("expected a string", path=path, line=number, field=field)
        check_text(text, path, number, field)
    if row.get("id") is not None and not isinstance(row["id"], PARQUET_IDS):
        raise InputError("expected a string or a number", path=path, line=number, field="id")
    return BatchContext(number, _check_id(row.get("id"), path, number), Query(texts["left"], texts["right"]))


def _check_id(value: Any, path: Path, number: int) -> Any:
    """`value`, the id the output writes back, refused when it holds NaN or an infinity: Python's JSON
    parser takes them in (NaN, Infinity, -Infinity) and a Parquet float column can hold them, but they are
    not JSON."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise InputError("NaN and infinities are not JSON numbers", path=path, line=number, field="id") from None
    return value


def _check_visible(context: BatchContext, path: Path, left_only: bool) -> BatchContext:
    """`context`, refused when what ranks it shows nothing (see has_visible_text): both sides, or with
    `left_only` its left side."""
    needs = "a letter, number, punctuation mark or symbol"
    if left_only and not has_visible_text(context.query.left):
        message = f"the left context shows nothing, and --left-only ranks by it alone: it needs {needs}"
        raise InputError(message, path=path, line=context.line, field="left")
    if not (has_visible_text(context.query.left) or has_visible_text(context.query.right)):
        message = f"the context shows nothing on either side: left or right needs {needs}"
        raise InputError(message, path=path, line=context.line)
    return context


def read_contexts(path: str | Path, left_only: bool = False) -> list[BatchContext]:
    """Every context of a JSONL file ({"left", "right", "id"}), a TSV file or a Parquet file (columns left,
    right and id; by suffix); blank lines are skipped. A context that shows nothing to rank by (with
    `left_only`, --left-only: on its left) is refused here, before the command loads its model."""
    path = Path(path)
    if path.suffix.lower() == PARQUET_SUFFIX:
        parsed = (_parquet_context(row, path, number) for number, row in enumerate(_parquet_rows(path), start=1))
    else:
        parse = _jsonl_context if path.suffix.lower() in JSONL_SUFFIXES else _tsv_context
        parsed = (parse(text, path, number) for number, text in decoded_lines(path, "input file") if text.strip())
    contexts = [_check_visible(context, path, left_only) for context in parsed]
    if not contexts:
        raise InputError("the input file has no contexts", path=path)
    return contexts
