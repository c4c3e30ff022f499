"""Hybrid ranking: normalised signals, weights fitted to what helps, and quotes a signal does not cover."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from quoter.baselines.lexical_signals import lexical_signals
from quoter.datasets import Sample
from quoter.fusion import Fusion, FusionRule, HybridRanker, Signal, fit_fusion, normalized
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query


class FixedRanker:
    """Scores given in advance, one row per query."""

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        return self.scores[: len(queries)]


@pytest.mark.parametrize("rule", list(FusionRule))
def test_an_uncovered_quote_gets_the_neutral_value_of_the_covered_ones(rule):
    scores = np.array([[3.0, 1.0, 0.0, 2.0]])
    covered = np.array([True, True, False, True])
    view = normalized(scores, rule, covered)
    assert view[0, 2] == pytest.approx(view[0, covered].mean())
    assert view[0, 0] > view[0, 3] > view[0, 1]
    if rule is FusionRule.ZSCORE:
        assert view[0, 2] == pytest.approx(0.0)


def test_fitting_weights_a_helpful_signal_and_leaves_a_useless_one_out():
    rng = np.random.default_rng(0)
    gold = np.arange(20) % 10
    dense = rng.normal(size=(20, 10))
    dense[np.arange(20), gold] += 1.0  # a weak signal
    exact = np.zeros((20, 10))
    exact[np.arange(20), gold] = 1.0  # names the gold quote
    noise = rng.normal(size=(20, 10))
    fusion, mrr = fit_fusion({"dense": dense, "exact": exact, "noise": noise}, gold, FusionRule.ZSCORE)
    assert fusion.weights["exact"] > 0 and mrr == 1.0
    fusion, mrr = fit_fusion({"dense": exact, "noise": noise}, gold, FusionRule.ZSCORE)
    assert fusion.weights == {"dense": 1.0, "noise": 0.0} and mrr == 1.0
    assert Fusion.from_json(fusion.to_json()) == fusion


def test_a_quote_without_known_contexts_is_ranked_by_the_other_signals():
    records = [QuoteRecord("the early bird catches the worm"), QuoteRecord("a stitch in time saves nine")]
    records.append(QuoteRecord("look before you leap", gloss="think before acting"))  # added later: no contexts
    known = [Sample("get up at dawn and", 0, "", 1), Sample("mend it now,", 1, "", 2)]
    signals = lexical_signals(records, known, Language.EN)
    assert signals["crm"].covered.tolist() == [True, True, False]
    dense = FixedRanker(np.array([[0.2, 0.1, 0.9], [0.1, 0.8, 0.2]]))
    ranker = HybridRanker({"dense": Signal(dense), **signals}, Fusion(weights={"dense": 1.0, "bm25": 1.0, "crm": 1.0}))
    queries = [Query("you should think before acting:", ""), Query("mend the tear now, for", "")]
    scores = ranker.score(queries)
    assert scores[0].argmax() == 2  # dense and BM25 over its gloss carry the new quote
    assert scores[1].argmax() == 1  # CRM still counts for the quotes it knows
