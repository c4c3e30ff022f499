"""A hybrid bundle served: the server ranks by the bundle's fused score (dense, BM25, CRM and knn), and a
quote added at run time, which has no training contexts, is still found by the dense score and BM25."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from quoter.bundle import Bundle, QuoteRecord
from quoter.datasets import Sample
from quoter.fusion import Fusion
from quoter.hybrid_bundle import bundle_ranker
from quoter.ranking import Query
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import tiny_bundle

# Weights large enough that the planted lexical evidence outweighs the tiny model's random dense scores
# (a z-score over 6 quotes is at most about 2.2).
FUSION = Fusion(weights={"dense": 1.0, "bm25": 3.0, "crm": 5.0, "knn": 1.0})
KNOWN = [Sample("my pet", 0, "purred", 1), Sample("the farm animal", 1, "barked at me", 2)]


@pytest.fixture
def hybrid(tmp_path) -> Bundle:
    bundle = tiny_bundle(tmp_path / "tok")
    bundle.fusion, bundle.known_contexts = FUSION, list(KNOWN)
    bundle.known_vectors = bundle.context_encoder.encode([Query(sample.left, sample.right) for sample in KNOWN])
    bundle.save(tmp_path / "bundle")
    return Bundle.load(tmp_path / "bundle")


def test_the_server_ranks_a_hybrid_bundle_as_evaluation_does(hybrid):
    queries = [Query("my pet", "purred"), Query("the farm animal", ""), Query("the cat sat", "")]
    expected = bundle_ranker(hybrid).score(queries)
    found = Recommender(hybrid).recommend(queries, k=3)
    for row, results in zip(expected, found):
        assert [r.id for r in results] == list(np.argsort(-row, kind="stable")[:3])
        np.testing.assert_allclose([r.score for r in results], np.sort(row)[::-1][:3], atol=1e-4)
    # The probability is still the softmax of the dense score over the whole set.
    dense = softmax(hybrid.context_encoder.encode(queries) @ hybrid.quote_vectors.T, axis=1)
    np.testing.assert_allclose([r.probability for r in found[0]], dense[0, [r.id for r in found[0]]], rtol=1e-4)
    assert [found[0][0].id, found[1][0].id] == [0, 1]  # CRM: the quotes of the known contexts
    # knn counts: without it the fused scores differ.
    hybrid.known_vectors = None
    assert not np.allclose(bundle_ranker(hybrid).score(queries), expected)


def test_a_quote_added_at_run_time_is_ranked_without_training_contexts(hybrid, tmp_path):
    recommender = Recommender(hybrid, folder=tmp_path / "bundle")
    new_id, _ = recommender.quotes.add(QuoteRecord("all that glitters", "", gloss="purring kitten"))
    query = Query("a purring kitten", "")
    assert recommender.recommend([query], k=1)[0][0].id == new_id
    assert recommender.recommend([Query("my pet", "purred")], k=1)[0][0].id == 0  # CRM still counts
    recommender.quotes.remove(new_id)
    assert new_id not in [r.id for r in recommender.recommend([query], k=10)[0]]
