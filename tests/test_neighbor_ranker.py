"""The knn signal: a quote scores the cosine of the context to the nearest of its known contexts, and a hybrid
encodes each context once for all the signals that read context vectors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.datasets import Sample
from quoter.encoders.neighbor_ranker import NeighborRanker
from quoter.encoders.ranker import EncoderRanker
from quoter.fusion import Fusion, HybridRanker, Signal
from quoter.ranking import Query

KNOWN = [Sample("a", 2, "", 1), Sample("b", 0, "", 2), Sample("c", 2, "", 3)]
KNOWN_VECTORS = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])


def test_a_quote_scores_the_cosine_to_its_nearest_known_context():
    ranker = NeighborRanker(4, KNOWN, KNOWN_VECTORS)
    assert ranker.covered.tolist() == [True, False, True, False]
    scores = ranker.score_vectors(np.array([[3.0, 0.0], [0.0, -1.0], [-1.0, 1.0]]))
    # quote 2 has two known contexts, (1, 0) and (-1, 0): its nearest counts; quote 0 has (0, 2).
    np.testing.assert_allclose(scores[:, [0, 2]], [[0.0, 1.0], [-1.0, 0.0], [2**-0.5, 2**-0.5]], atol=1e-6)
    np.testing.assert_array_equal(scores[:, [1, 3]], 0.0)


class CountingEncoder:
    """Context vectors from the length of the left context; counts its calls."""

    config = None

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, queries: Sequence[Query], batch_size: int = 32) -> np.ndarray:
        self.calls += 1
        return np.array([[len(query.left), 1.0] for query in queries])


def test_the_signals_that_read_context_vectors_share_one_encoding():
    encoder = CountingEncoder()
    dense = EncoderRanker(encoder, np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]]))
    neighbors = NeighborRanker(4, KNOWN, KNOWN_VECTORS)
    signals = {"dense": Signal(dense), "knn": Signal(neighbors, neighbors.covered)}
    ranker = HybridRanker(signals, Fusion(weights={"dense": 1.0, "knn": 1.0}), encoder.encode)
    queries = [Query("abc", ""), Query("", "x")]
    scores = ranker.score(queries)
    assert encoder.calls == 1
    vectors = encoder.encode(queries)
    separate = HybridRanker(signals, ranker.fusion).signal_scores(queries, vectors)
    np.testing.assert_allclose(separate["dense"], vectors @ dense.quote_vectors.T)
    np.testing.assert_allclose(separate["knn"], neighbors.score_vectors(vectors))
    assert scores.shape == (2, 4)
