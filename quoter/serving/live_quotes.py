"""The quote set a server recommends from, which can change while it runs: quotes by stable id, their
vectors in a QuoteIndex, no text listed twice, and the changes saved beside the bundle they came from.

A bundle numbers its quotes by line; once quotes are added and removed those numbers no longer match, so
the live set is saved in its own folder inside the bundle folder, `quote_index/`, by a QuoteStore: each
change is saved before it is acknowledged, and a removed id is never given to another quote.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quoter.bundle import Bundle, QuoteRecord
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import InputError, QuoterError
from quoter.quote_record import has_visible_text
from quoter.quote_set import QuoteSet, encode_quote_set
from quoter.serving.index_config import IndexConfig
from quoter.serving.quote_index import QuoteIndex
from quoter.serving.quote_store import QuoteStore, StoredQuotes, StoreOrigin

LIVE_FOLDER = "quote_index"


class UnknownQuoteError(QuoterError):
    """No quote has this id."""


class QuoteConflictError(QuoterError):
    """An add gives a listed quote another source or gloss than it is listed with (`field` names which): the
    quote is not listed twice, and what the add gives would be lost without a word."""

    def __init__(self, quote_id: int, field: str) -> None:
        self.quote_id = quote_id
        self.field = field
        super().__init__(
            f"the quote is already listed, as id {quote_id}, with another {field}; remove it first to list it "
            f"with this {field}"
        )


@dataclass(frozen=True)
class ScoredQuote:
    """A quote found for a context: its id, record, inner-product score and softmax probability."""

    id: int
    record: QuoteRecord
    score: float
    probability: float


@dataclass(frozen=True)
class ScoredSet:
    """The whole live set scored for some contexts: ids and records in the same order, the inner-product
    scores (contexts, quotes), and the version of the set they were taken from."""

    ids: np.ndarray
    records: list[QuoteRecord]
    scores: np.ndarray
    version: int


def quote_key(text: str) -> str:
    """What makes two quotes the same: their text without surrounding white space."""
    return text.strip()


class LiveQuotes:
    """Quotes by id with their index; add and remove are safe while other threads search."""

    def __init__(
        self,
        records: dict[int, QuoteRecord],
        index: QuoteIndex,
        encoder: QuoteEncoder,
        store: QuoteStore | None = None,
        next_id: int = 0,
    ) -> None:
        """`store`: where every change is saved, or None to keep changes in memory; `next_id`: the smallest
        id a new quote may get (raised past the ids in use)."""
        self._records = dict(sorted(records.items()))
        self._next_id = max(next_id, max(self._records, default=-1) + 1)
        self._by_text = {quote_key(record.text): quote_id for quote_id, record in self._records.items()}
        self._index = index
        self._encoder = encoder
        self._store = store
        self._lock = threading.RLock()
        self._version = 0  # counts changes, so that what is derived from the set knows when to rebuild

    @classmethod
    def from_bundle(
        cls,
        bundle: Bundle,
        config: IndexConfig = IndexConfig(),
        folder: Path | None = None,
        quotes: QuoteSet | None = None,
    ) -> LiveQuotes:
        """`quotes` (a set the bundle's quote encoder made; None: the bundle's own, ids = line numbers), or the
        live set saved in `folder` if there is one; new quotes are encoded by the bundle's quote encoder."""
        served = bundle.quote_set() if quotes is None else quotes
        return cls.open(served.stored(), bundle.quote_encoder, config, folder)

    @classmethod
    def open(
        cls,
        quotes: StoredQuotes,
        encoder: QuoteEncoder,
        config: IndexConfig = IndexConfig(),
        folder: Path | None = None,
    ) -> LiveQuotes:
        """`quotes`, or the live set saved in `folder` (a bundle folder) if there is one; changes are saved
        there from now on (None: kept in memory). A saved set whose changes were made to other `quotes` (or
        vectors of another encoder) is refused."""
        store = None
        if folder is not None:
            origin = StoreOrigin.of(quotes, encoder.identity)
            store, quotes = QuoteStore.open(Path(folder) / LIVE_FOLDER, quotes, origin)
        index = QuoteIndex(np.array(list(quotes.records), dtype=np.int64), quotes.vectors, config)
        return cls(quotes.records, index, encoder, store, quotes.next_id)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def index(self) -> QuoteIndex:
        """The vector index."""
        return self._index

    def get(self, quote_id: int) -> QuoteRecord:
        """The quote with this id."""
        try:
            return self._records[quote_id]
        except KeyError:
            raise UnknownQuoteError("no quote has this id") from None  # the id may be any size: not echoed

    def id_of(self, text: str) -> int | None:
        """The id of the quote with this text, if it is listed."""
        return self._by_text.get(quote_key(text))

    def browse(self, offset: int, limit: int, contains: str = "") -> tuple[int, list[tuple[int, QuoteRecord]]]:
        """Quotes in id order whose text or source contains `contains` (case-insensitive): the number of
        matches and the page [offset, offset + limit) of them."""
        needle = contains.casefold()
        with self._lock:
            matches = [
                (quote_id, record)
                for quote_id, record in self._records.items()
                if needle in record.text.casefold() or needle in record.source.casefold()
            ]
        return len(matches), matches[offset : offset + limit]

    def add(self, record: QuoteRecord) -> tuple[int, bool]:
        """List a quote; return its id and whether it is new. A text already listed keeps its id, and the add
        is refused (QuoteConflictError) if it gives that quote another source or gloss; a text that shows
        nothing (see has_visible_text) is refused."""
        record = QuoteRecord(quote_key(record.text), record.source.strip(), record.gloss.strip())
        if not has_visible_text(record.text):
            raise InputError(
                "the quote has no letter, number, punctuation or symbol: only white space, control, zero-width or "
                "combining characters",
                field="quote",
            )
        with self._lock:
            known = self._listed(record)
        if known is not None:
            return known, False
        # Encode outside the lock: searches go on meanwhile.
        vector = encode_quote_set(self._encoder, [record]).vectors
        with self._lock:
            known = self._listed(record)
            if known is not None:
                return known, False
            quote_id = self._next_id
            # Saved first: a change that could not be saved is not made.
            if self._store is not None:
                self._store.add(quote_id, record, vector[0])
            self._next_id += 1
            self._index.add(np.array([quote_id]), vector)
            self._records[quote_id] = record
            self._by_text[record.text] = quote_id
            self._version += 1
        return quote_id, True

    def _listed(self, record: QuoteRecord) -> int | None:
        """The id of the listed quote with the record's text, if any; a QuoteConflictError if the record gives
        it another source or gloss (an empty one gives none). Called under the lock."""
        quote_id = self.id_of(record.text)
        if quote_id is None:
            return None
        listed = self._records[quote_id]
        for field, given, kept in (("source", record.source, listed.source), ("gloss", record.gloss, listed.gloss)):
            if given and given != kept:
                raise QuoteConflictError(quote_id, field)
        return quote_id

    def remove(self, quote_id: int) -> QuoteRecord:
        """Unlist a quote by id; return it."""
        with self._lock:
            record = self.get(quote_id)
            if self._store is not None:
                self._store.remove(quote_id)
            self._index.remove(np.array([quote_id]))
            del self._records[quote_id]
            del self._by_text[quote_key(record.text)]
            self._version += 1
        return record

    def fingerprint(self) -> str:
        """A hash of the quote set as it is now: ids, records and vectors."""
        with self._lock:
            digest = hashlib.sha256(self._index.fingerprint().encode("ascii"))
            for quote_id, record in sorted(self._records.items()):
                digest.update(json.dumps([quote_id, record.to_json()], ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()

    def score_all(self, vectors: np.ndarray) -> ScoredSet:
        """Every quote's score for each context vector, with the records and the set's version, as one
        consistent view."""
        with self._lock:
            ids, scores = self._index.all_scores(vectors)
            return ScoredSet(ids, [self._records[int(i)] for i in ids], scores, self._version)

    def search(self, vectors: np.ndarray, ks: Sequence[int]) -> list[list[ScoredQuote]]:
        """For each context vector, its top ks[i] quotes, best first, with probabilities over all quotes."""
        with self._lock:
            scores, ids, log_normalizers = self._index.search(vectors, max(ks, default=0))
            results = []
            for k, row_scores, row_ids, log_normalizer in zip(ks, scores, ids, log_normalizers):
                found = [(int(i), float(s)) for i, s in zip(row_ids, row_scores) if i >= 0][:k]
                results.append(
                    [ScoredQuote(i, self._records[i], s, float(np.exp(s - log_normalizer))) for i, s in found]
                )
        return results
