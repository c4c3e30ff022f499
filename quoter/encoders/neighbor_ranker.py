"""The `knn` signal of hybrid ranking: CRM with the context encoder's vectors in place of BM25.

A quote scores the cosine between the query context and the nearest of its known (training) contexts. On
small training sets this catches what neither the dense score (context against quote) nor CRM (shared
words) sees: a context that says what an earlier context of the same quote said, in other words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.datasets import Sample


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """The rows scaled to length 1 (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


class NeighborRanker:
    """Scores each quote by the cosine of a context vector to the nearest known context of the quote; a quote
    without known contexts is not covered (`covered` False) and scores 0."""

    def __init__(self, n_quotes: int, known_contexts: Sequence[Sample], known_vectors: np.ndarray) -> None:
        if len(known_contexts) != len(known_vectors):
            raise ValueError(f"{len(known_contexts)} known contexts but {len(known_vectors)} vectors")
        order = np.argsort([sample.quote_id for sample in known_contexts], kind="stable")
        quote_ids = np.array([known_contexts[i].quote_id for i in order], dtype=np.int64)
        self.n_quotes = n_quotes
        self.known_vectors = unit_rows(known_vectors)[order] if len(order) else np.zeros((0, 0), np.float32)
        self.scored_quotes, self.group_starts = np.unique(quote_ids, return_index=True)
        self.covered = np.zeros(n_quotes, dtype=bool)
        self.covered[self.scored_quotes] = True

    def score_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """(contexts, quotes) scores for context vectors of the encoder that made the known vectors."""
        scores = np.zeros((len(vectors), self.n_quotes), dtype=np.float32)
        if len(self.scored_quotes):
            similarity = unit_rows(vectors) @ self.known_vectors.T
            scores[:, self.scored_quotes] = np.maximum.reduceat(similarity, self.group_starts, axis=1)
        return scores
