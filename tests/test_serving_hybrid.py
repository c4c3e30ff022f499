"""A hybrid bundle served: the server ranks by the bundle's fused score (dense, BM25, CRM and knn), and a
quote added at run time, which has no training contexts, is still found by the dense score and BM25."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.special import softmax

from quoter.bundle import Bundle, QuoteRecord
from quoter.datasets import Sample
from quoter.fusion import Fusion, hubness
from quoter.hybrid_bundle import bundle_ranker, ranker_over
from quoter.quote_set import encode_quote_set
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


def test_with_hubness_the_server_and_evaluation_take_the_same_hubness_off_an_added_quote_too(hybrid, tmp_path):
    hybrid.fusion = Fusion(weights=dict(FUSION.weights), hubness=1)
    hybrid.save(tmp_path / "hubness")
    bundle = Bundle.load(tmp_path / "hubness")
    assert bundle.fusion.hubness == 1  # saved and read back with the fusion
    queries = [Query("my pet", "purred"), Query("the farm animal", ""), Query("the cat sat", "")]
    recommender = Recommender(bundle, folder=tmp_path / "hubness")
    new_id, _ = recommender.quotes.add(QuoteRecord("all that glitters"))
    records = [*bundle.quotes, QuoteRecord("all that glitters")]
    added = encode_quote_set(bundle.quote_encoder, records[-1:]).vectors  # as the live set encodes it
    vectors = np.concatenate([bundle.quote_vectors, added])
    expected = ranker_over(bundle, records, vectors).score(queries)
    for row, results in zip(expected, recommender.recommend(queries, k=len(records))):
        assert [r.id for r in results] == list(np.argsort(-row, kind="stable"))
        # The tiny model's quotes score nearly alike, and their z-scores magnify the rounding of the two ways
        # the dense score is computed (torch in the live index, numpy here).
        np.testing.assert_allclose([r.score for r in results], np.sort(row)[::-1], atol=0.05)
    # The hubness counts: without it the same set ranks otherwise.
    without = ranker_over(replace(bundle, fusion=FUSION), records, vectors).score(queries)
    assert not np.allclose(without, expected) and new_id == len(bundle.quotes)


def test_hubness_is_the_mean_of_the_highest_similarities_to_the_known_contexts():
    quotes = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    known = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 0.2]], dtype=np.float32)
    np.testing.assert_allclose(hubness(quotes, known, 2), [0.75, 0.35])
    np.testing.assert_allclose(hubness(quotes, known, 10), [0.5, 0.7 / 3])  # fewer known than k: all of them
    assert not hubness(quotes, known, 0).any() and not hubness(quotes, None, 2).any()
