"""The quote index finds what brute force finds, keeps ids through changes and saves; the live quote set
never lists a text twice and reads back what it saved."""

import errno
import os
from dataclasses import replace

import numpy as np
import pytest

from quoter.bundle import QuoteRecord
from quoter.errors import QuoterError
from quoter.ranking import Query
from quoter.serving.live.index_config import IndexConfig, IndexKind
from quoter.serving.live.live_quotes import LiveQuotes, UnknownQuoteError
from quoter.serving.live.quote_index import QuoteIndex, ivf_clusters, recall_at_k
from tests.serving_fixtures import tiny_bundle


def random_vectors(rows: int, dim: int = 24, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def brute_force(queries, vectors, ids, k):
    scores = queries @ vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), ids[order], scores


def test_exact_search_is_brute_force_with_stable_ids():
    vectors, queries = random_vectors(500), random_vectors(30, seed=1)
    ids = np.arange(1000, 1500)
    index = QuoteIndex(ids, vectors)
    scores, found, log_norm = index.search(queries, 7)
    want_scores, want_ids, all_scores = brute_force(queries, vectors, ids, 7)
    np.testing.assert_array_equal(found, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(log_norm, np.log(np.exp(all_scores.astype(np.float64)).sum(axis=1)), rtol=1e-5)

    index.remove(ids[:250:2])
    index.add(np.array([7]), queries[0] * 100)  # now the best match of the first query by far
    keep = ~np.isin(ids, ids[:250:2])
    scores, found, _ = index.search(queries, 5)
    assert found[0, 0] == 7 and len(index) == keep.sum() + 1
    now_vectors = np.concatenate([vectors[keep], queries[:1] * 100])
    want_scores, want_ids, _ = brute_force(queries, now_vectors, np.append(ids[keep], 7), 5)
    np.testing.assert_array_equal(found, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-4)


def test_k_beyond_the_quote_count_returns_every_quote():
    scores, found, _ = QuoteIndex(np.arange(3), random_vectors(3)).search(random_vectors(2, seed=3), 10)
    assert found.shape == (2, 3) and sorted(found[0]) == [0, 1, 2]


def test_an_emptied_index_finds_nothing_and_takes_new_quotes():
    index = QuoteIndex(np.arange(3), random_vectors(3))
    index.remove(np.arange(3))
    scores, found, log_norm = index.search(random_vectors(2, seed=5), 4)
    assert found.shape == (2, 0) and np.isneginf(log_norm).all()
    index.add(np.array([10]), random_vectors(1, seed=6))
    assert index.search(random_vectors(1, seed=7), 4)[1].tolist() == [[10]]


def test_ids_must_be_distinct():
    index = QuoteIndex(np.arange(3), random_vectors(3))
    with pytest.raises(ValueError, match="distinct"):
        index.add(np.array([2]), random_vectors(1))


def test_ivf_is_approximate_but_close_and_supports_changes():
    vectors, queries = random_vectors(4000, dim=16), random_vectors(50, dim=16, seed=2)
    assert ivf_clusters(IndexConfig(kind=IndexKind.IVF), 4000) == 102
    assert recall_at_k(vectors, queries, IndexConfig(kind=IndexKind.IVF, nprobe=102), k=10) == 1.0
    few = recall_at_k(vectors, queries, IndexConfig(kind=IndexKind.IVF, nprobe=1), k=10)
    assert 0.0 < few < 1.0
    index = QuoteIndex(np.arange(4000), vectors, IndexConfig(kind=IndexKind.IVF, nprobe=1))
    index.set_nprobe(102)  # every cluster: as exact as exact search
    np.testing.assert_array_equal(
        index.search(queries, 10)[1], QuoteIndex(np.arange(4000), vectors).search(queries, 10)[1]
    )
    with pytest.raises(QuoterError, match="IVF"):
        QuoteIndex(np.arange(4000), vectors).set_nprobe(4)
    index = QuoteIndex(np.arange(4000), vectors, IndexConfig(kind=IndexKind.IVF, nprobe=102))
    index.remove(np.arange(10))
    index.add(np.array([9999]), queries[0] * 100)
    assert index.search(queries[:1], 1)[1][0, 0] == 9999


def clustered_unit_vectors(rows: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((50, dim))[rng.integers(0, 50, rows)] + 0.7 * rng.standard_normal((rows, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_ivf_estimates_the_softmax_normaliser_from_its_head_and_a_sample():
    vectors = clustered_unit_vectors(20000)
    queries = 10 * clustered_unit_vectors(60, seed=1)  # scores spread like a trained model's
    ids = np.arange(20000)
    _, _, exact = QuoteIndex(ids, vectors).search(queries, 10)
    config = IndexConfig(kind=IndexKind.IVF, nprobe=16, normalizer_head=100, normalizer_sample=4000)
    _, _, estimated = QuoteIndex(ids, vectors, config).search(queries, 10)
    error = estimated - exact  # in log space: 0.1 is a probability 10% off
    assert np.abs(error).max() < 0.2 and np.percentile(np.abs(error), 90) < 0.1 and abs(error.mean()) < 0.02
    # A quote set no larger than the sample gets the exact normaliser.
    small = IndexConfig(kind=IndexKind.IVF, nprobe=1, normalizer_head=100, normalizer_sample=20000)
    np.testing.assert_allclose(QuoteIndex(ids, vectors, small).search(queries, 10)[2], exact, rtol=1e-6)
    with pytest.raises(QuoterError, match="smaller than its sample"):
        IndexConfig(normalizer_head=100, normalizer_sample=100)


def test_live_quotes_add_remove_and_persist(tmp_path):
    bundle = tiny_bundle(tmp_path)
    bundle.save(tmp_path / "bundle")
    live = LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle")
    assert len(live) == 5 and live.get(1).text == "the dog ran home"
    assert live.add(QuoteRecord("  the dog ran home ", "Farm")) == (1, False)
    new_id, created = live.add(QuoteRecord("the happy cat", "New"))
    assert (new_id, created) == (5, True)
    vector = bundle.quote_encoder.encode(["the happy cat"])
    best = live.search(vector, [1])[0][0]  # the quote's own vector finds it
    assert best.id == 5 and best.record == QuoteRecord("the happy cat", "New")
    live.remove(5)
    assert live.add(QuoteRecord("the happy cat"))[0] == 6  # a removed id is never given again
    live.remove(0)
    with pytest.raises(UnknownQuoteError):
        live.remove(0)
    assert live.browse(0, 10, "DOG") == (3, [(1, live.get(1)), (2, live.get(2)), (4, live.get(4))])
    context = bundle.context_encoder.encode([Query("the cat", "home")])
    listed, found = live.browse(0, 100), live.search(context, [10])
    del live  # the process ends: its lock on the saved set goes

    reloaded = LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle")
    assert reloaded.browse(0, 100) == listed
    assert reloaded.search(context, [10]) == found
    assert reloaded.add(QuoteRecord("a mat"))[0] == 7
    assert sorted(r.id for r in reloaded.search(context, [10])[0]) == [1, 2, 3, 4, 6, 7]
    probabilities = [r.probability for r in reloaded.search(context, [10])[0]]
    assert sum(probabilities) == pytest.approx(1.0) and probabilities == sorted(probabilities, reverse=True)


def test_a_quote_listed_with_a_gloss_is_encoded_and_kept_with_it(tmp_path):
    bundle = tiny_bundle(tmp_path)
    bundle.quote_encoder.config = replace(bundle.quote_encoder.config, gloss=True)
    live = LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle")
    record = QuoteRecord("the happy cat", "New", "a dog on the mat")
    quote_id, _ = live.add(record)
    glossed = bundle.quote_encoder.encode_records([record])
    assert not np.allclose(glossed, bundle.quote_encoder.encode(["the happy cat"]), atol=1e-4)
    best = live.search(glossed, [1])[0][0]
    assert best.id == quote_id and best.record == record
    del live
    assert LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle").get(quote_id) == record


def test_a_change_that_cannot_be_saved_is_not_made(tmp_path, monkeypatch):
    bundle = tiny_bundle(tmp_path)
    live = LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle")
    write = os.pwrite

    def disk_full(fd, data, offset):
        write(fd, data[:10], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", disk_full)
    with pytest.raises(QuoterError, match=r"could not save the change \(No space left on device\)"):
        live.add(QuoteRecord("the happy cat"))
    assert len(live) == 5 and live.id_of("the happy cat") is None
    monkeypatch.undo()
    assert live.add(QuoteRecord("a mat")) == (5, True)
    del live
    reloaded = LiveQuotes.from_bundle(bundle, folder=tmp_path / "bundle")
    assert len(reloaded) == 6 and reloaded.get(5) == QuoteRecord("a mat")
