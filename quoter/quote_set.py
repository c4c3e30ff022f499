"""A quote set: quotes with their sources, glosses and stable ids, their vectors, and the identity of the quote
encoder that made the vectors. `encode_quote_set` is the one place quote sets are encoded; `quoter encode`
writes one to a file, which serve, batch and evaluate rank with the bundle whose quote encoder made it.

The file is JSON lines, a header then one quote a line, the quote lines as in the server's saved sets:

    {"format": "quoter-quotes", "version": 1, "encoder": identity, "dim": vector size, "next_id": id}
    {"id", "quote", "source"[, "gloss"], "vector"}      (vector: base64, little-endian float32)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from quoter.atomic_files import write_bytes_atomic
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import InputError
from quoter.quote_record import QuoteRecord
from quoter.text_lines import decoded_lines, json_object

QUOTE_SET_FORMAT = "quoter-quotes"
QUOTE_SET_VERSION = 1
VECTOR_TYPE = np.dtype("<f4")


@dataclass(frozen=True)
class QuoteSet:
    """Quotes by stable id (`ids[i]` is the id of `records[i]`, whose vector is row i) and the identity of
    the quote encoder that made the vectors (None: an encoder never saved)."""

    ids: list[int]
    records: list[QuoteRecord]
    vectors: np.ndarray
    encoder: str | None

    def __post_init__(self) -> None:
        if not len(self.ids) == len(self.records) == self.vectors.shape[0]:
            raise ValueError(f"{len(self.ids)} ids, {len(self.records)} quotes, {self.vectors.shape[0]} vectors")

    def check_encoder(self, encoder: QuoteEncoder, path: Path) -> None:
        """Refuse vectors another quote encoder made: they would be compared with the wrong contexts."""
        if self.encoder is None or self.encoder != encoder.identity:
            raise InputError(
                "the quote set was encoded by another quote encoder than the bundle's; encode it again with "
                "`quoter encode --bundle BUNDLE`",
                path=path,
            )


def vector_text(vector: np.ndarray) -> str:
    """A vector as base64 of little-endian float32."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype=VECTOR_TYPE).tobytes()).decode("ascii")


def text_vector(text: Any) -> np.ndarray:
    """`vector_text`'s output read back; a ValueError or TypeError when it is none."""
    return np.frombuffer(base64.b64decode(text, validate=True), dtype=VECTOR_TYPE)


def quote_item(quote_id: int, record: QuoteRecord, vector: np.ndarray) -> dict[str, Any]:
    """One quote of a saved set as JSON: {"id", "quote", "source"[, "gloss"], "vector"}."""
    return {"id": quote_id, **record.to_json(), "vector": vector_text(vector)}


def parse_quote_item(item: Any, path: Path, line: int, alternative: str = "") -> tuple[int, QuoteRecord, np.ndarray]:
    """Read `quote_item`'s JSON; anything else is an InputError at path:line (`alternative` adds what else
    the line may be)."""
    try:
        quote_id = item["id"]
        record = QuoteRecord.from_json(item)
        vector = text_vector(item["vector"])
    except (KeyError, TypeError, ValueError):
        raise InputError('expected {"id", "quote", "source", "vector"}' + alternative, path=path, line=line) from None
    if not isinstance(quote_id, int):
        raise InputError(f"the id {quote_id!r} is not an integer", path=path, line=line)
    return quote_id, record, vector


def encode_quote_set(
    encoder: QuoteEncoder,
    records: Sequence[QuoteRecord],
    known: QuoteSet | None = None,
    batch_size: int = ENCODE_BATCH,
) -> QuoteSet:
    """The records (ids 0, 1, ... in their order) with their vectors by `encoder`. A quote that `known`, a
    set the same encoder made, already holds with exactly the input the encoder reads keeps its vector."""
    vectors = np.zeros((len(records), encoder.model.config.hidden_size), dtype=np.float32)
    row_of = {}
    if known is not None and known.encoder is not None and known.encoder == encoder.identity:
        row_of = {encoder.text(r.text, r.description): row for row, r in enumerate(known.records)}
    inputs = [encoder.text(record.text, record.description) for record in records]
    reused = [(index, row_of[text]) for index, text in enumerate(inputs) if text in row_of]
    if reused:
        indices, rows = zip(*reused)
        vectors[list(indices)] = known.vectors[list(rows)]
    missing = [index for index, text in enumerate(inputs) if text not in row_of]
    if missing:
        vectors[missing] = encoder.encode_records([records[index] for index in missing], batch_size)
    return QuoteSet(list(range(len(records))), list(records), vectors, encoder.identity)


def write_quote_set(path: Path, quotes: QuoteSet) -> None:
    """Write the set to `path` atomically."""
    header = {
        "format": QUOTE_SET_FORMAT,
        "version": QUOTE_SET_VERSION,
        "encoder": quotes.encoder,
        "dim": quotes.vectors.shape[1],
        "next_id": max(quotes.ids, default=-1) + 1,
    }
    lines = [(json.dumps(header) + "\n").encode("utf-8")]
    items = (quote_item(i, record, vector) for i, record, vector in zip(quotes.ids, quotes.records, quotes.vectors))
    lines += [(json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8") for item in items]
    write_bytes_atomic(path, b"".join(lines))


def read_quote_set(path: Path) -> QuoteSet:
    """Read a set written by `write_quote_set`; anything else is a one-line InputError at path:line."""
    lines = decoded_lines(Path(path), "quote set")
    first = next(lines, None)
    expected = f"the header of a quote set (written by `quoter encode`; format '{QUOTE_SET_FORMAT}')"
    header = json_object(first[1], path, 1, expected) if first is not None else None
    if header is None or header.get("format") != QUOTE_SET_FORMAT:
        raise InputError(f"not a quote set (written by `quoter encode`; format '{QUOTE_SET_FORMAT}')", path=path)
    if header.get("version") != QUOTE_SET_VERSION:
        raise InputError(f"quote set version {header.get('version')} is not supported", path=path, line=1)
    dim = header.get("dim")
    if not isinstance(dim, int):
        raise InputError('expected an integer "dim"', path=path, line=1)
    ids, records, vectors = [], [], []
    for number, text in lines:
        item = json_object(text, path, number, 'a quote {"id", "quote", "source", "vector"}')
        quote_id, record, vector = parse_quote_item(item, path, number)
        if len(vector) != dim:
            raise InputError(f"quote {quote_id}: a vector not of size {dim}", path=path, line=number)
        ids.append(quote_id)
        records.append(record)
        vectors.append(vector)
    if len(set(ids)) != len(ids):
        raise InputError("an id is given to two quotes", path=path)
    matrix = np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, dim), np.float32)
    encoder = header.get("encoder")
    return QuoteSet(ids, records, matrix, None if encoder is None else str(encoder))
