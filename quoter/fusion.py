"""Hybrid ranking: the scores of several rankers (dense, BM25, CRM, knn) fused into one, with weights fitted
on the valid split.

Each signal's scores are first made comparable per context: `zscore` standardises them over the quote set,
`rrf` (reciprocal rank fusion) replaces them by 1 / (RRF_K + rank). A signal may not cover every quote (CRM
knows only quotes with training contexts, not quotes added later): an uncovered quote gets the signal's
neutral value for that context (z = 0; the mean reciprocal rank), so it neither gains nor loses by it and is
ranked by the other signals.

Signals that score context vectors (the dense score, knn) share one encoding of each context.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from quoter.metrics import ranks_from_scores
from quoter.ranking import Query, Ranker
from quoter.saved_config import from_json, to_json

RRF_K = 60  # the constant of Cormack et al. (2009), used unchanged by most RRF implementations
# Weights of the lexical signals relative to the dense one (weight 1) that fitting tries.
WEIGHT_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
# How many weighted sums fitting holds at once (float32: 4 bytes each).
FIT_BLOCK_VALUES = 2**25


class FusionRule(str, Enum):
    """How a signal's raw scores become comparable with the others' before the weighted sum."""

    ZSCORE = "zscore"
    RRF = "rrf"


@dataclass(frozen=True)
class Fusion:
    """A fitted fusion: the rule and each signal's weight (signals absent from `weights` are ignored); and
    `hubness`: when above 0, the dense score of each quote is taken less its hubness (see `hubness`), the mean of
    its `hubness` highest similarities to the known contexts, so that quotes drawn towards contexts (a pulled
    quote) do not outrank the others for every context (0: the dense score as it is)."""

    rule: FusionRule = FusionRule.ZSCORE
    weights: dict[str, float] = field(default_factory=lambda: {"dense": 1.0})
    hubness: int = 0

    def describe(self) -> str:
        """One line for logs: the rule and each signal's weight."""
        return f"{self.rule.value}: " + ", ".join(f"{name} {weight:g}" for name, weight in self.weights.items())

    def to_json(self) -> dict[str, Any]:
        """`{"rule", "weights"}`, as bundles store it, derived from the fields."""
        return to_json(self)

    @classmethod
    def from_json(cls, data: Any) -> Fusion:
        """Read `to_json`'s output; a bad value is a one-line InputError naming the field."""
        return from_json(cls, data, None)


def hubness(quote_vectors: np.ndarray, known_vectors: np.ndarray | None, k: int) -> np.ndarray:
    """Each quote's hubness: the mean of its `k` highest inner products with the known context vectors (fewer
    where fewer are known; 0 where none are, or k is 0). A quote close to every context has a high one."""
    if k <= 0 or known_vectors is None or not len(known_vectors):
        return np.zeros(len(quote_vectors), dtype=np.float32)
    similarities = np.asarray(known_vectors, dtype=np.float32) @ np.asarray(quote_vectors, dtype=np.float32).T
    top = min(k, len(similarities))
    return np.partition(similarities, len(similarities) - top, axis=0)[-top:].mean(axis=0).astype(np.float32)


@runtime_checkable
class VectorRanker(Protocol):
    """A ranker that scores quotes from context vectors, which the hybrid encodes once for all of them."""

    def score_vectors(self, vectors: np.ndarray) -> np.ndarray: ...


@dataclass
class Signal:
    """One ranker of a hybrid and the quotes it covers (None: every quote)."""

    ranker: Ranker | VectorRanker
    covered: np.ndarray | None = None  # bool mask over the quote set


def normalized(scores: np.ndarray, rule: FusionRule, covered: np.ndarray | None = None) -> np.ndarray:
    """Scores (contexts, quotes) made comparable across signals by `rule`; uncovered quotes get the neutral
    value of each context."""
    columns = slice(None) if covered is None else covered
    part = scores[:, columns].astype(np.float64)
    if rule is FusionRule.ZSCORE:
        std = part.std(axis=1, keepdims=True)
        part = (part - part.mean(axis=1, keepdims=True)) / np.where(std > 0, std, 1.0)
    else:
        ranks = np.argsort(np.argsort(-part, axis=1, kind="stable"), axis=1) + 1
        part = 1.0 / (RRF_K + ranks)
    if covered is None:
        return part
    result = np.repeat(part.mean(axis=1, keepdims=True), scores.shape[1], axis=1)
    result[:, covered] = part
    return result


def fuse(normalized_scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """The weighted sum of normalised score matrices (signals without a weight count 0)."""
    shape = next(iter(normalized_scores.values())).shape
    total = np.zeros(shape)
    for name, weight in weights.items():
        if weight:
            total += weight * normalized_scores[name]
    return total


def fused_scores(raw: Mapping[str, np.ndarray], covered: Mapping[str, np.ndarray | None], fusion: Fusion) -> np.ndarray:
    """The fusion of raw score matrices (same shape), each normalised first; a weighted signal without scores
    (CRM where no quote of the set has training contexts) counts as neutral."""
    views = {name: normalized(matrix, fusion.rule, covered.get(name)) for name, matrix in raw.items()}
    return fuse(views, {name: weight for name, weight in fusion.weights.items() if name in views})


def fit_fusion(
    scores: Mapping[str, np.ndarray],
    gold: Sequence[int],
    rule: FusionRule,
    covered: Mapping[str, np.ndarray | None] | None = None,
    anchor: str = "dense",
) -> tuple[Fusion, float]:
    """The weights (the anchor signal fixed at 1, the others from WEIGHT_GRID) with the best MRR of `gold`
    over `scores` (raw score matrices of the fitting contexts), and that MRR. Ties go to the smaller
    weights, so a signal that does not help stays out."""
    covered = covered or {}
    views = {name: normalized(matrix, rule, covered.get(name)) for name, matrix in scores.items()}
    return best_weights(views, gold, rule, anchor)


def best_weights(
    views: Mapping[str, np.ndarray],
    gold: Sequence[int],
    rule: FusionRule,
    anchor: str = "dense",
    row_weights: np.ndarray | None = None,
) -> tuple[Fusion, float]:
    """fit_fusion over score matrices already normalised by `rule` (rows from several quote sets may be
    stacked, each normalised over its own set); the MRR weighs each row by `row_weights` (None: equally)."""
    others = [name for name in views if name != anchor]
    combinations = list(itertools.product(WEIGHT_GRID, repeat=len(others)))
    # Row c: the weights of combination c, the anchor's first.
    weights = np.array([[1.0, *combination] for combination in combinations], dtype=np.float32)
    # Each view less its gold column, (contexts, signals, quotes): a quote outranks the gold one (ties count
    # against it, as in ranks_from_scores) where the weighted sum of these is >= 0, the gold quote itself
    # included. Every combination's sums come from one matrix product, a block of contexts at a time.
    rows, columns = np.arange(len(gold)), np.asarray(gold, dtype=np.int64)
    margins = np.stack(
        [(views[name] - views[name][rows, columns][:, None]).astype(np.float32) for name in (anchor, *others)], axis=1
    )
    quotes = margins.shape[2]
    block = max(1, FIT_BLOCK_VALUES // max(1, quotes * len(combinations)))
    ranks = np.empty((len(gold), len(combinations)), dtype=np.int64)
    for begin in range(0, len(gold), block):
        totals = weights @ margins[begin : begin + block]
        ranks[begin : begin + block] = np.count_nonzero(totals >= 0, axis=2)
    mrrs = np.average(1.0 / ranks, axis=0, weights=row_weights)
    # Ties go to the earlier combination: the smaller weights, so a signal that does not help stays out.
    best = 0
    for index, mrr in enumerate(mrrs):
        if mrr > mrrs[best] + 1e-12:
            best = index
    return Fusion(rule, {anchor: 1.0, **dict(zip(others, combinations[best]))}), float(mrrs[best])


class HybridRanker:
    """A Ranker whose score is the fusion of its signals' scores; `encode` gives the context vectors that its
    VectorRanker signals score (None: the caller passes them)."""

    def __init__(
        self,
        signals: Mapping[str, Signal],
        fusion: Fusion,
        encode: Callable[[Sequence[Query]], np.ndarray] | None = None,
    ) -> None:
        self.signals = dict(signals)
        self.fusion = fusion
        self.encode = encode

    def signal_scores(
        self, queries: Sequence[Query], vectors: np.ndarray | None = None, names: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """The raw scores of the named signals (default: the weighted ones) for the queries, whose context
        vectors are `vectors` or, when a signal needs them, encoded here once."""
        if names is None:
            names = [name for name, weight in self.fusion.weights.items() if weight and name in self.signals]
        scores = {}
        for name in names:
            ranker = self.signals[name].ranker
            if isinstance(ranker, VectorRanker):
                if vectors is None:
                    if self.encode is None:
                        raise ValueError(f"signal {name} scores context vectors, and the hybrid has no encoder")
                    vectors = self.encode(queries)
                scores[name] = ranker.score_vectors(vectors)
            else:
                scores[name] = ranker.score(queries)
        return scores

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        """The fused score of every quote for each query."""
        return fused_scores(self.signal_scores(queries), self.covered(), self.fusion)

    def covered(self) -> dict[str, np.ndarray | None]:
        """Which quotes each signal covers."""
        return {name: signal.covered for name, signal in self.signals.items()}


def fit_hybrid(
    signals: Mapping[str, Signal],
    queries: Sequence[Query],
    gold: Sequence[int],
    rule: FusionRule,
    vectors: np.ndarray,
) -> tuple[HybridRanker, dict[str, float]]:
    """A HybridRanker over `signals` with the fusion fitted on the queries, whose context vectors are
    `vectors`, and their gold quote ids; and the MRRs on them: `fused`, and each signal's alone."""
    ranker = HybridRanker(signals, Fusion(rule))
    raw = ranker.signal_scores(queries, vectors, names=list(signals))
    ranker.fusion, fused = fit_fusion(raw, gold, rule, ranker.covered())
    alone = {name: float(np.mean(1.0 / ranks_from_scores(scores, gold))) for name, scores in raw.items()}
    return ranker, {"fused": fused, **alone}
