"""The paper's metrics against values computed by hand."""

import math

import numpy as np
import pytest

from quoter.metrics import METRIC_KEYS, rank_metrics, ranks_from_scores


def test_metrics_match_hand_computed_values():
    ranks = [1, 2, 5, 10, 150]
    m = rank_metrics(ranks)
    assert set(m) == set(METRIC_KEYS)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 5 + 1 / 10 + 1 / 150) / 5)
    # One relevant item: 1/log2(rank+1) within the top 5, else 0.
    assert m["ndcg@5"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(6)) / 5)
    assert m["recall@1"] == pytest.approx(0.2)
    assert m["recall@10"] == pytest.approx(0.8)
    assert m["recall@100"] == pytest.approx(0.8)  # rank 150 is beyond 100
    assert m["median_rank"] == 5
    assert m["mean_rank"] == pytest.approx(33.6)
    mean = 33.6
    assert m["rank_std"] == pytest.approx(math.sqrt(sum((r - mean) ** 2 for r in ranks) / 5))  # population
    assert m["n"] == 5


def test_recall_at_100_counts_rank_100_but_not_101():
    m = rank_metrics([100, 101])
    assert m["recall@100"] == 0.5
    assert m["recall@10"] == 0.0
    assert m["ndcg@5"] == 0.0
    assert m["median_rank"] == 100.5


def test_ties_count_against_the_gold_quote():
    scores = np.array(
        [
            [0.5, 0.5, 0.5, 0.5],  # all alike: gold ranks last, not first
            [0.9, 0.1, 0.9, 0.3],  # one other quote ties with gold
            [0.2, 0.8, 0.1, 0.4],  # a clear winner
            [0.1, 0.2, 0.3, 0.4],  # gold is the worst
        ]
    )
    assert ranks_from_scores(scores, [1, 0, 1, 0]).tolist() == [4, 2, 1, 4]


def test_nan_scores_rank_last():
    scores = np.array([[np.nan, 0.0, 1.0], [0.3, np.nan, 0.1]])
    assert ranks_from_scores(scores, [0, 2]).tolist() == [3, 2]


def test_a_constant_scorer_gets_the_worst_metrics():
    n_quotes = 50
    ranks = ranks_from_scores(np.zeros((10, n_quotes)), np.arange(10))
    m = rank_metrics(ranks)
    assert m["mean_rank"] == n_quotes
    assert m["recall@10"] == 0.0


@pytest.mark.parametrize("bad", [[], [0, 1], [1.5, 2.0], [[1, 2]]])
def test_invalid_ranks_are_refused(bad):
    with pytest.raises(ValueError):
        rank_metrics(bad)
