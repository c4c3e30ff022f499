"""Ranking metrics of the QuoteR paper, computed from 1-based ranks of the gold quote over the full quote set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METRIC_KEYS = ("mrr", "ndcg@5", "recall@1", "recall@10", "recall@100", "median_rank", "mean_rank", "rank_std", "n")


def ranks_from_scores(scores: np.ndarray, gold: Sequence[int] | np.ndarray) -> np.ndarray:
    """1-based rank of each row's gold quote; ties count against the gold quote.

    The rank is 1 + the number of other quotes scoring greater than or equal to the gold quote, so a
    model that scores everything alike ranks the gold quote last, not first. NaN scores count as -inf.
    """
    scores = np.asarray(scores, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.int64)
    if scores.ndim != 2 or gold.shape != (scores.shape[0],):
        raise ValueError(f"expected scores (n, quotes) and gold (n,), got {scores.shape} and {gold.shape}")
    scores = np.where(np.isnan(scores), -np.inf, scores)
    gold_scores = scores[np.arange(len(gold)), gold]
    # The gold quote itself always satisfies >=, which supplies the "1 +".
    return (scores >= gold_scores[:, None]).sum(axis=1).astype(np.int64)


def rank_metrics(ranks: Sequence[int] | np.ndarray) -> dict[str, float]:
    """MRR, NDCG@5, Recall@1/10/100 (fractions), median/mean rank and population std, and n.

    Every value is an average over contexts (never over batches). NDCG@5 has one relevant item,
    so it is 1/log2(rank + 1) for ranks up to 5 and 0 beyond.
    """
    ranks = np.asarray(ranks)
    if ranks.ndim != 1 or ranks.size == 0:
        raise ValueError("rank_metrics needs a non-empty 1-D sequence of ranks")
    if not np.issubdtype(ranks.dtype, np.integer) or ranks.min() < 1:
        raise ValueError("ranks must be integers starting at 1")
    ranks = ranks.astype(np.float64)
    ndcg = np.where(ranks <= 5, 1.0 / np.log2(ranks + 1.0), 0.0)
    return {
        "mrr": float(np.mean(1.0 / ranks)),
        "ndcg@5": float(np.mean(ndcg)),
        "recall@1": float(np.mean(ranks <= 1)),
        "recall@10": float(np.mean(ranks <= 10)),
        "recall@100": float(np.mean(ranks <= 100)),
        "median_rank": float(np.median(ranks)),
        "mean_rank": float(np.mean(ranks)),
        "rank_std": float(np.std(ranks)),
        "n": int(ranks.size),
    }
