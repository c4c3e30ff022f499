"""Stage 1: train the context and quote encoders together; each context scores its gold quote against
`count` negatives, and the loss is the cross-entropy over those 1 + count scores (the paper's Eq. 5), with
negatives.cache over every train quote as well."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.quote_record import QuoteRecord
from quoter.quote_set import encode_quote_set
from quoter.training.config import StageConfig
from quoter.training.data import SampleBatch
from quoter.training.negatives import NegativeSampler
from quoter.training.stage_module import StageModule

NEGATIVES_KEY = "quoter_negatives"


class JointModule(StageModule):
    """Both encoders trained with negative sampling over the quote set `records` (in id order).

    The quotes a batch trains on are chosen here, not by the data module: hard negatives come from the quote
    encoder's own vectors. So the module holds the quote set, tokenized once."""

    def __init__(
        self,
        context_encoder: ContextEncoder,
        quote_encoder: QuoteEncoder,
        records: list[QuoteRecord],
        stage: StageConfig,
        negatives: NegativeSampler,
    ) -> None:
        super().__init__(context_encoder, stage)
        self.quote_encoder = quote_encoder
        self.records = records
        self.negatives = negatives
        self.quote_rows = quote_encoder.rows(records)

    def on_train_epoch_start(self) -> None:
        if self.negatives.needs_mining(self.current_epoch):
            pool = self.negatives.pool.tolist()
            vectors = encode_quote_set(self.quote_encoder, [self.records[q] for q in pool]).vectors
            self.negatives.mine(vectors, self.current_epoch)

    def batch_loss(self, batch: SampleBatch, epoch: int | None = None) -> torch.Tensor:
        """Cross-entropy of each context's gold quote among it and its negatives (those of `epoch`, by
        default the current one). Each distinct quote of the batch is encoded once."""
        golds = np.array(batch.quote_ids, dtype=np.int64)
        epoch = self.current_epoch if epoch is None else epoch
        negatives = self.negatives.sample(batch.sample_ids, batch.quote_ids, epoch)
        candidates = np.concatenate([golds[:, None], negatives], axis=1)
        unique, inverse = np.unique(candidates, return_inverse=True)
        quote_vectors = self.quote_encoder(self.quote_encoder.collate([self.quote_rows[q] for q in unique]))
        context_vectors = self.context_encoder(batch.contexts)
        scores = context_vectors @ quote_vectors.T
        index = torch.from_numpy(inverse.reshape(candidates.shape)).to(scores.device)
        logits = scores.gather(1, index).float()
        if self.negatives.config.cache:
            # Every other train quote as a negative too, from the epoch's vector cache (no gradient).
            cached = (context_vectors @ self.negatives.cached_vectors.to(scores.device).T).float()
            cached = cached.masked_fill(self.negatives.cache_mask(candidates).to(scores.device), float("-inf"))
            logits = torch.cat([logits, cached], dim=1)
        return F.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long, device=logits.device))

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The context encoder at the stage's learning rate, the quote encoder at quote_lr when it is set."""
        quote = [p for p in self.quote_encoder.parameters() if p.requires_grad]
        context = [p for p in self.context_encoder.parameters() if p.requires_grad]
        if self.stage.quote_lr is None:
            return [{"params": context + quote}]
        return [{"params": context}, {"params": quote, "lr": self.stage.quote_lr}]

    def all_quote_vectors(self) -> torch.Tensor:
        return torch.from_numpy(encode_quote_set(self.quote_encoder, self.records).vectors)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        checkpoint[NEGATIVES_KEY] = self.negatives.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        self.negatives.load_state_dict(checkpoint[NEGATIVES_KEY])
