"""Rank quotes with encoders: every quote is encoded once, then a query scores all quotes by inner product
with its context vector (the paper's Eq. 4 before the softmax, which does not change the ranking)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from quoter.encoders.configs import ENCODE_BATCH, ContextEncoderConfig
from quoter.ranking import Query


class ContextVectors(Protocol):
    """What encodes contexts: the ContextEncoder, or an ONNX Runtime session of it (OnnxContextEncoder)."""

    config: ContextEncoderConfig

    def encode(self, queries: Sequence[Query], batch_size: int = ENCODE_BATCH) -> np.ndarray: ...


class EncoderRanker:
    """A Ranker over a fixed quote matrix (n_quotes, hidden) and a context encoder; `runtime` says what runs
    the encoder (for logs); `offsets`: an amount taken off each quote's score (None: none)."""

    def __init__(
        self,
        context_encoder: ContextVectors,
        quote_vectors: np.ndarray,
        batch_size: int = ENCODE_BATCH,
        runtime: str = "torch",
        offsets: np.ndarray | None = None,
    ) -> None:
        self.context_encoder = context_encoder
        self.quote_vectors = np.ascontiguousarray(quote_vectors, dtype=np.float32)
        self.batch_size = batch_size
        self.runtime = runtime
        self.offsets = offsets

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        """Inner products of each query's context vector with every quote vector."""
        return self.score_vectors(self.context_encoder.encode(queries, self.batch_size))

    def score_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """Inner products of context vectors (of this ranker's context encoder) with every quote vector, less
        the quotes' offsets."""
        scores = vectors @ self.quote_vectors.T
        return scores if self.offsets is None else scores - self.offsets[None, :]
