"""Hybrid ranking in the server: a hybrid bundle's fusion of dense, BM25, CRM and knn scores over the live
quote set, so that the server and `quoter batch` rank as `quoter evaluate --method bundle` does.

Every quote is scored (the lexical signals and the z-scores need the whole set), then the top k are taken
by the fused score. The probability stays the softmax of the dense score over the whole set, as for any
bundle; the dense score the fusion reads is taken less each quote's hubness where the bundle's fusion says so
(LiveQuotes keeps it). BM25, CRM and knn are rebuilt for the set's current texts after it changes. A quote added at run
time knows the usage examples it was added with, which CRM and knn read beside the bundle's own known contexts;
one added without any is left neutral by CRM and knn, and the dense score and BM25 rank it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from scipy.special import logsumexp

from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.fusion import Fusion, HybridRanker, fused_scores
from quoter.hybrid_bundle import known_signals
from quoter.ranking import Query
from quoter.serving.live.live_quotes import ScoredQuote, ScoredSet


def added_contexts(scored: ScoredSet) -> tuple[list[Sample], np.ndarray | None]:
    """The usage examples the set's quotes were added with, as samples whose quote_id is the quote's place in
    `scored`, and their context vectors (None when there are none)."""
    place = {int(quote_id): row for row, quote_id in enumerate(scored.ids)}
    samples = [
        Sample(context.left, place[quote_id], context.right, line)
        for quote_id, examples in scored.examples.items()
        for line, context in enumerate(examples.contexts, start=1)
    ]
    vectors = [examples.vectors for examples in scored.examples.values()]
    return samples, np.concatenate(vectors) if vectors else None


class LiveFusion:
    """Ranks a live quote set by a hybrid bundle's fusion."""

    def __init__(self, bundle: Bundle) -> None:
        if bundle.fusion is None:
            raise ValueError("the bundle is not hybrid: it has no fusion")
        self._bundle = bundle
        self.fusion: Fusion = bundle.fusion
        self._lock = threading.Lock()
        self._version: int | None = None
        self._known_ranker = HybridRanker({}, self.fusion)

    def _known(self, scored: ScoredSet) -> HybridRanker:
        """BM25, CRM and knn over the set's current records and the usage examples of those added with some
        (rebuilt only after the set changed)."""
        with self._lock:
            if scored.version != self._version:
                signals = known_signals(self._bundle, scored.records, *added_contexts(scored))
                self._known_ranker = HybridRanker(signals, self.fusion)
                self._version = scored.version
            return self._known_ranker

    def top(
        self, queries: Sequence[Query], vectors: np.ndarray, scored: ScoredSet, ks: Sequence[int]
    ) -> list[list[ScoredQuote]]:
        """For each query (its context vector in `vectors`), its top ks[i] quotes of `scored` by fused score,
        best first."""
        if not scored.records:
            return [[] for _ in ks]
        known = self._known(scored)
        dense = scored.scores if scored.hubness is None else scored.scores - scored.hubness[None, :]
        raw = {"dense": dense, **known.signal_scores(queries, vectors)}
        fused = fused_scores(raw, known.covered(), self.fusion)
        log_normalizers = logsumexp(scored.scores.astype(np.float64), axis=1)
        results = []
        for k, row, dense, log_normalizer in zip(ks, fused, scored.scores, log_normalizers):
            # The k best without sorting the whole set: this runs for every request.
            head = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            best = head[np.argsort(-row[head], kind="stable")]
            results.append(
                [
                    ScoredQuote(
                        int(scored.ids[i]), scored.records[i], float(row[i]), float(np.exp(dense[i] - log_normalizer))
                    )
                    for i in best
                ]
            )
        return results
