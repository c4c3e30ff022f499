"""The quote set a server recommends from, which can change while it runs: quotes by stable id, their
vectors in a QuoteIndex, no text listed twice, and the changes saved beside the bundle they came from.

A bundle numbers its quotes by line; once quotes are added and removed those numbers no longer match, so
the live set is saved in its own folder inside the bundle folder, `quote_index/`, by a QuoteStore: each
change is saved before it is acknowledged, and a removed id is never given to another quote.

A quote may be added with usage examples, contexts it is used in, when the set learns from them (UsageLearning,
for a hybrid bundle): its vector is pulled towards their context vectors as the bundle's own quotes were, and
the set keeps them, saved with the quote, for CRM and knn (live_fusion).

Where the changes are saved is a ChangeStore: a folder (quote_store.QuoteStore), or a PostgreSQL database that
several processes share (postgres_store.PostgresStore), whose changes made by the others come in through
`catch_up`.

Two locks keep readers from waiting on a store: changes (this process's, and those `catch_up` brings in) take
turns under the change lock, which is held across the store's round trips, and the set in memory is read and
changed under the read lock, which is held only for work in memory. A change that cannot have the change lock
within CHANGE_WAIT_S (the one before it waits on a store that hangs) is refused with StoreBusyError.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from quoter.bundle import Bundle, QuoteRecord
from quoter.datasets import Sample
from quoter.default_bundles import usage_vectors
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.encoders.ranker import ContextVectors
from quoter.errors import InputError, QuoterError
from quoter.fusion import hubness
from quoter.quote_record import has_visible_text
from quoter.quote_set import QuoteSet, encode_quote_set
from quoter.ranking import Query
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.live.quote_index import QuoteIndex
from quoter.serving.live.quote_store import (
    ChangeNotSavedError,
    QuoteStore,
    StoredQuotes,
    StoreOrigin,
    UsageExamples,
)
from quoter.text_safety import check_quote_input

LIVE_FOLDER = "quote_index"
# How long a change waits for the one before it: longer than a healthy store takes for a change, shorter than a
# client waits for an answer.
CHANGE_WAIT_S = 10.0


class UnknownQuoteError(QuoterError):
    """No quote has this id."""


class QuoteConflictError(QuoterError):
    """An add gives a listed quote another source, gloss or usage examples than it is listed with (`field`
    names which): the quote is not listed twice, and what the add gives would be lost without a word."""

    def __init__(self, quote_id: int, field: str) -> None:
        self.quote_id = quote_id
        self.field = field
        other, these = (
            ("other examples", "these examples") if field == "examples" else (f"another {field}", f"this {field}")
        )
        super().__init__(
            f"the quote is already listed, as id {quote_id}, with {other}; remove it first to list it with {these}"
        )


class StoreUnavailableError(ChangeNotSavedError):
    """The database the set is shared in cannot be reached: the change was not saved, so it was not made."""


class OutcomeUnknownError(ChangeNotSavedError):
    """The connection to the shared database was lost while the change was committed, and the database could not
    be asked whether it was: the change may have been made or not. Retrying the same change is safe."""


class StoreBusyError(ChangeNotSavedError):
    """The change before this one still waits for the store (one that hangs), so this one was not made."""


class ListedElsewhereError(QuoterError):
    """Another process listed the quote's text meanwhile: the add was not saved, and the set has caught up."""


@dataclass(frozen=True)
class QuoteChange:
    """A change saved to a shared store: quote `quote_id` added (its record, vector (dim,) and the usage examples
    it was added with) or, with no record, removed."""

    quote_id: int
    record: QuoteRecord | None = None
    vector: np.ndarray | None = None
    examples: UsageExamples | None = None


class ChangeStore(Protocol):
    """Where a live set saves each change before making it; no id is ever given twice. A `shared` store is
    changed by other processes too: it, not the set in memory, knows which quotes are listed."""

    shared: bool

    def hold(self) -> None:
        """Become the one process that changes the set, now rather than at the first change: a store that another
        process holds raises SetLockedError, one that cannot be written FolderNotWritableError."""
        ...

    def add_new(self, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None = None) -> int:
        """Save an added quote (vector (dim,)) with the usage examples it was added with, under an id never given
        before; return the id. A shared store raises ListedElsewhereError when another process listed the text."""
        ...

    def remove(self, quote_id: int) -> None:
        """Save a removal; a shared store raises UnknownQuoteError for a quote it does not list."""
        ...

    def close(self) -> None:
        """Let go of what the store holds (a lock, connections); a later change takes it again."""
        ...


@dataclass(frozen=True)
class UsageLearning:
    """How a live set learns from the usage examples a quote is added with, as a hybrid bundle learned from its
    own: their context vectors come from `context` (the runtime that encodes queries, so that knn compares like
    with like), and the quote's vector is pulled `pull` towards them (default_bundles.usage_vectors)."""

    context: ContextVectors
    pull: float
    batch_size: int = ENCODE_BATCH
    known: np.ndarray | None = None  # the bundle's known context vectors, which each quote's hubness is over
    hubness: int = 0  # the bundle fusion's (quoter.fusion.hubness): how many of them it is over; 0: none

    def hubness_of(self, vectors: np.ndarray) -> np.ndarray:
        """The hubness of quote vectors (n, dim), which the fused ranking takes off their dense scores."""
        return hubness(vectors, self.known, self.hubness)

    def learn(self, vector: np.ndarray, contexts: Sequence[Query]) -> tuple[np.ndarray, UsageExamples]:
        """The quote's vector (1, dim) pulled towards the contexts, and the contexts with their vectors."""
        vectors = self.context.encode(contexts, self.batch_size)
        samples = [Sample(context.left, 0, context.right, line) for line, context in enumerate(contexts, start=1)]
        return usage_vectors(vector, samples, vectors, self.pull), UsageExamples(tuple(contexts), vectors)


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
    scores (contexts, quotes), the version of the set they were taken from, the usage examples of its
    quotes added with some, by id, and each quote's hubness in the same order (None where the set takes none
    off: see UsageLearning)."""

    ids: np.ndarray
    records: list[QuoteRecord]
    scores: np.ndarray
    version: int
    examples: Mapping[int, UsageExamples]
    hubness: np.ndarray | None = None


def quote_key(text: str) -> str:
    """What makes two quotes the same: their text without surrounding white space."""
    return text.strip()


def same_examples(given: Sequence[Query], listed: UsageExamples | None) -> bool:
    """Whether usage examples given again are those a quote is listed with, in any order; none given are."""
    kept = () if listed is None else listed.contexts
    return not given or sorted((c.left, c.right) for c in given) == sorted((c.left, c.right) for c in kept)


class LiveQuotes:
    """Quotes by id with their index; add and remove are safe while other threads search."""

    def __init__(
        self,
        records: dict[int, QuoteRecord],
        index: QuoteIndex,
        encoder: QuoteEncoder,
        store: ChangeStore | None = None,
        next_id: int = 0,
        examples: Mapping[int, UsageExamples] | None = None,
        usage: UsageLearning | None = None,
    ) -> None:
        """`store`: where every change is saved, or None to keep changes in memory; `next_id`: the smallest
        id a new quote kept in memory may get (raised past the ids in use); `examples`: the usage examples of
        quotes added with some, by id; `usage`: how the set learns from them (None: quotes cannot be added with
        any)."""
        self._records = dict(sorted(records.items()))
        # Replaced, never changed in place, so that a ScoredSet keeps the examples of its own version.
        self._examples = dict(examples or {})
        self._usage = usage
        self._next_id = max(next_id, max(self._records, default=-1) + 1)
        self._by_text = {quote_key(record.text): quote_id for quote_id, record in self._records.items()}
        self._index = index
        self._encoder = encoder
        self._store = store
        # Each quote's hubness, where the set's UsageLearning takes it (a dict by id, and an array in the index's
        # order for the version it was made at).
        self._hubness: dict[int, float] = {}
        self._hubness_row: tuple[int, np.ndarray] | None = None
        self._lock = threading.RLock()  # the set in memory; never held across a store's round trip
        self._changing = threading.RLock()  # one change at a time, held across the store's round trips
        self._version = 0  # counts changes, so that what is derived from the set knows when to rebuild

    @classmethod
    def from_bundle(
        cls,
        bundle: Bundle,
        config: IndexConfig = IndexConfig(),
        folder: Path | None = None,
        quotes: QuoteSet | None = None,
        usage: UsageLearning | None = None,
    ) -> LiveQuotes:
        """`quotes` (a set the bundle's quote encoder made; None: the bundle's own, ids = line numbers), or the
        live set saved in `folder` if there is one; new quotes are encoded by the bundle's quote encoder and
        learn from their usage examples by `usage` (None: quotes cannot be added with any)."""
        served = bundle.quote_set() if quotes is None else quotes
        return cls.open(StoredQuotes.of_set(served), bundle.quote_encoder, config, folder, usage)

    @classmethod
    def open(
        cls,
        quotes: StoredQuotes,
        encoder: QuoteEncoder,
        config: IndexConfig = IndexConfig(),
        folder: Path | None = None,
        usage: UsageLearning | None = None,
    ) -> LiveQuotes:
        """`quotes`, or the live set saved in `folder` (a bundle folder) if there is one; changes are saved
        there from now on (None: kept in memory). A saved set whose changes were made to other `quotes` (or
        vectors of another encoder) is refused. `usage`: how added quotes learn from their usage examples."""
        store = None
        if folder is not None:
            origin = StoreOrigin.of(quotes, encoder.identity)
            store, quotes = QuoteStore.open(Path(folder) / LIVE_FOLDER, quotes, origin)
        return cls.of(quotes, encoder, config, store, usage)

    @classmethod
    def of(
        cls,
        quotes: StoredQuotes,
        encoder: QuoteEncoder,
        config: IndexConfig,
        store: ChangeStore | None,
        usage: UsageLearning | None,
    ) -> LiveQuotes:
        """`quotes` as they were read from `store` (None: kept in memory), indexed as `config` says."""
        index = QuoteIndex(np.array(list(quotes.records), dtype=np.int64), quotes.vectors, config)
        live = cls(quotes.records, index, encoder, store, quotes.next_id, quotes.examples, usage)
        if usage is not None and usage.hubness:
            live._hubness = dict(zip(quotes.records, usage.hubness_of(quotes.vectors).tolist()))
        return live

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

    def example_count(self, quote_id: int) -> int:
        """How many usage examples the quote with this id was added with (0 for any other id)."""
        examples = self._examples.get(quote_id)
        return 0 if examples is None else len(examples.contexts)

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

    def add(self, record: QuoteRecord, examples: Sequence[Query] = ()) -> tuple[int, bool]:
        """List a quote with the usage examples it is used in (contexts whose gap it fills; learned from by
        the set's UsageLearning); return its id and whether it is new. A text already listed keeps its id, and
        the add is refused (QuoteConflictError) if it gives that quote another source, gloss or examples; a
        text, source, gloss or example that quoter.text_safety refuses, an example that shows nothing on either
        side, and examples where the set does not learn from them are refused."""
        check_quote_input(record, examples)
        record = QuoteRecord(quote_key(record.text), record.source.strip(), record.gloss.strip())
        self._check_examples(examples)
        with self._lock:
            known = self._listed(record, examples)
        if known is not None:
            return known, False
        # Encode outside the lock: searches go on meanwhile.
        vector = encode_quote_set(self._encoder, [record]).vectors
        learned = None
        if examples and self._usage is not None:
            vector, learned = self._usage.learn(vector, examples)
        with self._change():
            with self._lock:
                known = self._listed(record, examples)
            if known is not None:
                return known, False
            # Saved first: a change that could not be saved is not made.
            try:
                quote_id = self._save_added(record, vector[0], learned)
            except ListedElsewhereError:
                # The set has caught up with the add that listed the text, and no change came after it.
                with self._lock:
                    known = self._listed(record, examples)
                if known is None:
                    raise
                return known, False
            with self._lock:
                self._list(quote_id, record, vector, learned)
        return quote_id, True

    @contextmanager
    def _change(self) -> Iterator[None]:
        """Hold the change lock, or refuse the change with StoreBusyError after CHANGE_WAIT_S."""
        if not self._changing.acquire(timeout=CHANGE_WAIT_S):
            raise StoreBusyError(
                f"the change before this one has waited for the quote store for {CHANGE_WAIT_S:g} s, so this one "
                "was not made"
            )
        try:
            yield
        finally:
            self._changing.release()

    def hold(self) -> None:
        """Become the one process that changes the set's store now (see ChangeStore.hold); nothing to hold for a
        set kept in memory."""
        if self._store is not None:
            self._store.hold()

    def _save_added(self, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None) -> int:
        """The id of a quote added now, saved to the store if there is one. Called under the change lock."""
        if self._store is not None:
            return self._store.add_new(record, vector, examples)
        quote_id = self._next_id
        self._next_id += 1
        return quote_id

    def _list(self, quote_id: int, record: QuoteRecord, vector: np.ndarray, examples: UsageExamples | None) -> None:
        """Make an add in memory (vector (1, dim)). Called under the read lock."""
        self._index.add(np.array([quote_id]), vector)
        self._records[quote_id] = record
        self._by_text[record.text] = quote_id
        if self._usage is not None and self._usage.hubness:
            self._hubness[quote_id] = float(self._usage.hubness_of(vector)[0])
        if examples is not None:
            self._examples = {**self._examples, quote_id: examples}
        self._version += 1

    def _check_examples(self, examples: Sequence[Query]) -> None:
        """Refuse usage examples the set cannot learn from, or that show nothing on either side."""
        if examples and self._usage is None:
            raise InputError(
                "this bundle does not learn from usage examples (it is not hybrid: it has no fusion of CRM and "
                "knn to rank with them); list the quote without examples",
                field="examples",
            )
        if not all(has_visible_text(context.left) or has_visible_text(context.right) for context in examples):
            raise InputError(
                "a usage example shows nothing on either side: left or right needs a letter, number, punctuation "
                "mark or symbol",
                field="examples",
            )

    def _listed(self, record: QuoteRecord, examples: Sequence[Query]) -> int | None:
        """The id of the listed quote with the record's text, if any; a QuoteConflictError if the record gives
        it another source or gloss (an empty one gives none) or the add other examples (none give none).
        Called under the read lock."""
        quote_id = self.id_of(record.text)
        if quote_id is None:
            return None
        listed = self._records[quote_id]
        for field, given, kept in (("source", record.source, listed.source), ("gloss", record.gloss, listed.gloss)):
            if given and given != kept:
                raise QuoteConflictError(quote_id, field)
        if not same_examples(examples, self._examples.get(quote_id)):
            raise QuoteConflictError(quote_id, "examples")
        return quote_id

    def remove(self, quote_id: int) -> QuoteRecord:
        """Unlist a quote by id; return it. A shared store is asked whether the quote is listed, rather than the
        set in memory, which may not have caught up with its add yet (the store's removal brings it in)."""
        with self._change():
            if self._store is None or not self._store.shared:
                self.get(quote_id)
            if self._store is not None:
                self._store.remove(quote_id)
            with self._lock:
                record = self.get(quote_id)
                self._unlist(quote_id)
        return record

    def _unlist(self, quote_id: int) -> None:
        """Make a removal in memory. Called under the read lock."""
        self._index.remove(np.array([quote_id]))
        record = self._records.pop(quote_id)
        del self._by_text[quote_key(record.text)]
        self._hubness.pop(quote_id, None)
        if quote_id in self._examples:
            self._examples = {key: value for key, value in self._examples.items() if key != quote_id}
        self._version += 1

    def catch_up(self, changes: Callable[[], Iterable[QuoteChange]]) -> None:
        """Make the changes that other processes saved to a shared store, in the order they were saved, without
        saving them again. `changes` reads them under the change lock, so that reading and making them is one
        step between this process's own changes, and outside the read lock, so that searches go on meanwhile."""
        with self._changing:
            made = list(changes())
            with self._lock:
                for change in made:
                    if change.record is None:
                        self._unlist(change.quote_id)
                    else:
                        assert change.vector is not None
                        self._list(change.quote_id, change.record, change.vector[None], change.examples)

    def close(self) -> None:
        """Let go of what the store holds: its lock or connections (a later change takes them again), and stop
        following a shared store."""
        if self._store is not None:
            self._store.close()

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
            records = [self._records[int(i)] for i in ids]
            return ScoredSet(ids, records, scores, self._version, self._examples, self._hubness_in_order(ids))

    def _hubness_in_order(self, ids: np.ndarray) -> np.ndarray | None:
        """The quotes' hubness in the order of `ids` (the index's, fixed between changes); None where the set
        takes none. Called under the read lock."""
        if not self._hubness:
            return None
        if self._hubness_row is None or self._hubness_row[0] != self._version:
            self._hubness_row = (self._version, np.array([self._hubness[int(i)] for i in ids], dtype=np.float32))
        return self._hubness_row[1]

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
