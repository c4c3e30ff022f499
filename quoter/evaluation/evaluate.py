"""Rank the gold quote of every context in a split against the whole quote set, then summarise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quoter.datasets import QuoteDataset, Sample
from quoter.errors import InputError
from quoter.evaluation.candidates import Candidates
from quoter.metrics import rank_metrics, ranks_from_scores
from quoter.progress import progress_bar
from quoter.ranking import Query, Ranker

# Ranges of the gold quote's number of training contexts, as in the paper's Figure 2; 0 is zero-shot.
FREQUENCY_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (0, 0),
    (1, 2),
    (3, 5),
    (6, 10),
    (11, 20),
    (21, 50),
    (51, 100),
    (101, None),
)

# Contexts scored at once: every quote's score for each is held in memory.
RANK_BATCH = 256


def bucket_label(low: int, high: int | None) -> str:
    """'0', '3-5' or '101+'."""
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}-{high}"


@dataclass
class EvaluationReport:
    """Ranks of one split's contexts and the metrics over all of them and over subsets."""

    method: str
    split: str
    quotes: int
    left_only: bool
    ranks: np.ndarray
    overall: dict[str, float]
    zero_shot: dict[str, float] | None
    buckets: list[dict[str, Any]] = field(default_factory=list)
    candidate_correct: np.ndarray | None = None  # per context with candidates: did its gold quote win?

    def to_json(self) -> dict[str, Any]:
        """The metrics JSON: the `rank_metrics` keys at top level, plus method, split, quotes and subsets."""
        return {
            **self.overall,
            "method": self.method,
            "split": self.split,
            "quotes": self.quotes,
            "left_only": self.left_only,
            "zero_shot": self.zero_shot,
            "frequency_buckets": self.buckets,
            **self.candidate_metrics(),
        }

    def candidate_metrics(self) -> dict[str, float | int]:
        """`candidate_accuracy` (share of contexts whose gold quote beat its other candidates) and
        `candidate_n`; empty without candidates."""
        if self.candidate_correct is None:
            return {}
        n = len(self.candidate_correct)
        return {"candidate_accuracy": float(self.candidate_correct.mean()) if n else 0.0, "candidate_n": n}


def rank_samples(
    ranker: Ranker,
    samples: Sequence[Sample],
    left_only: bool = False,
    batch_size: int = RANK_BATCH,
    progress: bool = False,
    candidates: Candidates | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """1-based rank of each sample's gold quote among all quotes the ranker scores (among the data file's
    own quotes when there are candidates), and, with candidates, whether each sample that has some was
    answered right."""
    ranks = np.empty(len(samples), dtype=np.int64)
    correct: list[np.ndarray] = []
    starts = range(0, len(samples), batch_size)
    for start in progress_bar(starts, desc="ranking", unit="batch", enabled=progress):
        batch = samples[start : start + batch_size]
        queries = [Query(s.left, "" if left_only else s.right) for s in batch]
        scores = ranker.score(queries)
        full_set = scores if candidates is None else scores[:, : candidates.full_set]
        ranks[start : start + len(batch)] = ranks_from_scores(full_set, [s.quote_id for s in batch])
        if candidates is not None:
            correct.append(candidates.correct(batch, scores))
    return ranks, None if candidates is None else np.concatenate(correct)


def evaluate(
    ranker: Ranker,
    dataset: QuoteDataset,
    split: str,
    method: str,
    left_only: bool = False,
    batch_size: int = RANK_BATCH,
    progress: bool = False,
    candidates: Candidates | None = None,
) -> EvaluationReport:
    """Evaluate a ranker on one split: overall metrics, the zero-shot subset and Figure 2's buckets, and the
    multiple-choice accuracy when there are candidates."""
    samples = dataset.split(split)
    if not samples:
        raise InputError(f"the '{split}' split is empty; nothing to evaluate", path=dataset.path)
    ranks, correct = rank_samples(ranker, samples, left_only, batch_size, progress, candidates)
    train_counts = dataset.quote_counts("train")
    gold_train_counts = np.array([train_counts[s.quote_id] for s in samples])
    zero_shot = gold_train_counts == 0
    buckets = []
    for low, high in FREQUENCY_BUCKETS:
        inside = (gold_train_counts >= low) & (gold_train_counts <= (high if high is not None else np.inf))
        if inside.any():
            quotes = len({samples[i].quote_id for i in np.flatnonzero(inside)})
            buckets.append({"train_contexts": bucket_label(low, high), "quotes": quotes, **rank_metrics(ranks[inside])})
    return EvaluationReport(
        method=method,
        split=split,
        quotes=len(dataset.quotes) if candidates is None else candidates.full_set,
        left_only=left_only,
        ranks=ranks,
        overall=rank_metrics(ranks),
        zero_shot=rank_metrics(ranks[zero_shot]) if zero_shot.any() else None,
        buckets=buckets,
        candidate_correct=correct,
    )
