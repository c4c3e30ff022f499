"""Hybrid ranking: the scores of several rankers (dense, BM25, CRM) fused into one, with weights fitted on
the valid split.

Each signal's scores are first made comparable per context: `zscore` standardises them over the quote set,
`rrf` (reciprocal rank fusion) replaces them by 1 / (RRF_K + rank). A signal may not cover every quote (CRM
knows only quotes with training contexts, not quotes added later): an uncovered quote gets the signal's
neutral value for that context (z = 0; the mean reciprocal rank), so it neither gains nor loses by it and is
ranked by the other signals.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from quoter.metrics import ranks_from_scores
from quoter.ranking import Query, Ranker

RRF_K = 60  # the constant of Cormack et al. (2009), used unchanged by most RRF implementations
# Weights of the lexical signals relative to the dense one (weight 1) that fitting tries.
WEIGHT_GRID = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


class FusionRule(str, Enum):
    """How a signal's raw scores become comparable with the others' before the weighted sum."""

    ZSCORE = "zscore"
    RRF = "rrf"


@dataclass(frozen=True)
class Fusion:
    """A fitted fusion: the rule and each signal's weight (signals absent from `weights` are ignored)."""

    rule: FusionRule = FusionRule.ZSCORE
    weights: dict[str, float] = field(default_factory=lambda: {"dense": 1.0})

    def describe(self) -> str:
        """One line for logs: the rule and each signal's weight."""
        return f"{self.rule.value}: " + ", ".join(f"{name} {weight:g}" for name, weight in self.weights.items())

    def to_json(self) -> dict:
        """`{"rule", "weights"}`, as bundles store it."""
        return {"rule": self.rule.value, "weights": dict(self.weights)}

    @classmethod
    def from_json(cls, data: Mapping) -> Fusion:
        """Read `to_json`'s output."""
        return cls(FusionRule(data["rule"]), {str(name): float(w) for name, w in data["weights"].items()})


@dataclass
class Signal:
    """One ranker of a hybrid and the quotes it covers (None: every quote)."""

    ranker: Ranker
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
    others = [name for name in scores if name != anchor]
    best: tuple[Fusion, float] | None = None
    for combination in itertools.product(WEIGHT_GRID, repeat=len(others)):
        weights = {anchor: 1.0, **dict(zip(others, combination))}
        mrr = float(np.mean(1.0 / ranks_from_scores(fuse(views, weights), gold)))
        if best is None or mrr > best[1] + 1e-12:
            best = (Fusion(rule, weights), mrr)
    assert best is not None
    return best


class HybridRanker:
    """A Ranker whose score is the fusion of its signals' scores."""

    def __init__(self, signals: Mapping[str, Signal], fusion: Fusion) -> None:
        self.signals = dict(signals)
        self.fusion = fusion

    def signal_scores(self, queries: Sequence[Query]) -> dict[str, np.ndarray]:
        """Each weighted signal's raw scores for the queries."""
        weighted = (name for name, weight in self.fusion.weights.items() if weight and name in self.signals)
        return {name: self.signals[name].ranker.score(queries) for name in weighted}

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        """The fused score of every quote for each query."""
        covered = {name: signal.covered for name, signal in self.signals.items()}
        return fused_scores(self.signal_scores(queries), covered, self.fusion)


def fit_hybrid(
    signals: Mapping[str, Signal], queries: Sequence[Query], gold: Sequence[int], rule: FusionRule
) -> tuple[HybridRanker, float]:
    """A HybridRanker over `signals` with the fusion fitted on the queries and their gold quote ids, and the
    fitted MRR on them."""
    raw = {name: signal.ranker.score(queries) for name, signal in signals.items()}
    fusion, mrr = fit_fusion(raw, gold, rule, {name: s.covered for name, s in signals.items()})
    return HybridRanker(signals, fusion), mrr
