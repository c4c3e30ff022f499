"""Rank quotes with encoders: every quote is encoded once, then a query scores all quotes by inner product
with its context vector (the paper's Eq. 4 before the softmax, which does not change the ranking)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.context_encoder import ContextEncoder
from quoter.ranking import Query


class EncoderRanker:
    """A Ranker over a fixed quote matrix (n_quotes, hidden) and a context encoder."""

    def __init__(
        self, context_encoder: ContextEncoder, quote_vectors: np.ndarray, batch_size: int = ENCODE_BATCH
    ) -> None:
        self.context_encoder = context_encoder
        self.quote_vectors = np.ascontiguousarray(quote_vectors, dtype=np.float32)
        self.batch_size = batch_size

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        """Inner products of each query's context vector with every quote vector."""
        return self.context_encoder.encode(queries, self.batch_size) @ self.quote_vectors.T
