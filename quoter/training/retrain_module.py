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
from quoter.training.data import TrainingData
from quoter.training.stage_module import StageModule


class RetrainModule(StageModule):
    """The context encoder trained against fixed quote vectors (one row per quote of the dataset)."""

    def __init__(
        self, context_encoder: ContextEncoder, quote_vectors: np.ndarray, data: TrainingData, stage: StageConfig
    ) -> None:
        super().__init__(context_encoder, data, stage)
        vectors = torch.from_numpy(np.ascontiguousarray(quote_vectors, dtype=np.float32))
        # Buffers follow the module to its device; not persistent, since they are inputs, not weights.
        self.register_buffer("quote_vectors", vectors, persistent=False)
        self.register_buffer("train_quote_vectors", vectors[data.train_quote_ids], persistent=False)
        target = np.full(len(data.quotes), -1, dtype=np.int64)
        target[data.train_quote_ids] = np.arange(len(data.train_quote_ids))
        self.target_of = torch.from_numpy(target)

    def batch_loss(self, sample_ids: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of each context's gold quote over all training quotes."""
        golds = torch.tensor([self.data.train[i].quote_id for i in sample_ids.tolist()])
        context_vectors = self.train_context_vectors(sample_ids)
        logits = (context_vectors @ self.train_quote_vectors.to(context_vectors.dtype).T).float()
        return F.cross_entropy(logits, self.target_of[golds].to(logits.device))

    def all_quote_vectors(self) -> torch.Tensor:
        return self.quote_vectors
