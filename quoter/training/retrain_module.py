"""Stage 2: the quote encoder is frozen and every quote encoded once; the context encoder (the stage-1 object
itself, not a fresh copy) keeps training with the cross-entropy over all training quotes.

The softmax runs over the quotes of the train split, not over valid- or test-only ones: those are unknown
at training time, and pushing them down as negatives would hurt exactly the zero-shot quotes."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from quoter.encoders.context_encoder import ContextEncoder
from quoter.training.config import StageConfig
from quoter.training.data import SampleBatch
from quoter.training.stage_module import StageModule


class RetrainModule(StageModule):
    """The context encoder trained against fixed quote vectors (one row per quote of the dataset), the
    softmax over the rows `train_quote_ids`."""

    def __init__(
        self,
        context_encoder: ContextEncoder,
        quote_vectors: np.ndarray,
        train_quote_ids: np.ndarray,
        stage: StageConfig,
    ) -> None:
        super().__init__(context_encoder, stage)
        vectors = torch.from_numpy(np.ascontiguousarray(quote_vectors, dtype=np.float32))
        # Buffers follow the module to its device; not persistent, since they are inputs, not weights.
        self.register_buffer("quote_vectors", vectors, persistent=False)
        self.register_buffer("train_quote_vectors", vectors[train_quote_ids], persistent=False)
        # Each quote id's column of the softmax (-1 outside the train quotes).
        target = np.full(len(vectors), -1, dtype=np.int64)
        target[train_quote_ids] = np.arange(len(train_quote_ids))
        self.register_buffer("target_of", torch.from_numpy(target), persistent=False)

    def batch_loss(self, batch: SampleBatch) -> torch.Tensor:
        """Cross-entropy of each context's gold quote over all training quotes."""
        golds = torch.tensor(batch.quote_ids, device=self.target_of.device)
        context_vectors = self.context_encoder(batch.contexts)
        logits = (context_vectors @ self.train_quote_vectors.to(context_vectors.dtype).T).float()
        return F.cross_entropy(logits, self.target_of[golds])

    def all_quote_vectors(self) -> torch.Tensor:
        return self.quote_vectors
