"""Stage 1: train the context and quote encoders together; each context scores its gold quote against
`count` negatives, and the loss is the cross-entropy over those 1 + count scores (the paper's Eq. 5), with
negatives.cache over every train quote as well; under DDP, as one process on the processes' batches together."""

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
from quoter.training.distributed import gather_ids, gather_rows
from quoter.training.negatives import NegativeSampler
from quoter.training.stage_module import StageModule

NEGATIVES_KEY = "quoter_negatives"


def candidate_columns(candidates: np.ndarray, encoded: list[np.ndarray], rank: int, width: int) -> np.ndarray:
    """Where each candidate quote's vector lies among the gathered quote vectors, whose rows are each process's
    encoded quotes `encoded[rank]` (sorted) padded to `width` rows: this process's own copy where it encoded
    the quote, else that of the first process that did."""
    order = [rank, *(other for other in range(len(encoded)) if other != rank)]
    ids = np.concatenate([encoded[other] for other in order])
    columns = np.concatenate([other * width + np.arange(len(encoded[other])) for other in order])
    distinct, first = np.unique(ids, return_index=True)
    return columns[first][np.searchsorted(distinct, candidates)]


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
        # Each quote id's row in the negatives' pool (len(pool) for quotes outside it), on the module's device,
        # where the cache's mask is made.
        pool_row = torch.full((len(records),), len(negatives.pool), dtype=torch.long)
        pool_row[torch.from_numpy(negatives.pool)] = torch.arange(len(negatives.pool))
        self.register_buffer("pool_row", pool_row, persistent=False)

    def on_train_epoch_start(self) -> None:
        if self.negatives.needs_mining(self.current_epoch):
            pool = self.negatives.pool.tolist()
            vectors = encode_quote_set(self.quote_encoder, [self.records[q] for q in pool]).vectors
            self.negatives.mine(vectors, self.current_epoch)

    def batch_loss(self, batch: SampleBatch, epoch: int | None = None) -> torch.Tensor:
        """Mean cross-entropy of each context's gold quote among it and its negatives (those of `epoch`, by
        default the current one), with negatives.cache every other train quote as well.

        Under DDP the processes train as one process on their batches concatenated in rank order: the gold
        quotes of all are gathered first, so that in-batch negatives come from the whole batch (a quote that is
        the gold of contexts in several processes is a negative of none of them, as within one batch); each
        process encodes its gold quotes and the other negatives it drew, and the quote vectors of all are
        gathered with their gradients, so that a quote another process's context is scored against gets that
        gradient too. Each distinct quote is encoded once a process."""
        epoch = self.current_epoch if epoch is None else epoch
        golds = np.array(batch.quote_ids, dtype=np.int64)
        everyone = gather_ids(self, golds)
        negatives = self.negatives.sample(batch.sample_ids, batch.quote_ids, epoch, np.concatenate(everyone))
        candidates = np.concatenate([golds[:, None], negatives], axis=1)
        # Other processes' gold quotes are theirs to encode.
        encoded = np.setdiff1d(np.unique(candidates), np.setdiff1d(np.concatenate(everyone), golds))
        everyone_encoded = gather_ids(self, encoded)
        width = max(len(ids) for ids in everyone_encoded)
        quote_vectors = gather_rows(self, self._encode_quotes(encoded), width)
        context_vectors = self.context_encoder(batch.contexts)
        scores = context_vectors @ quote_vectors.T
        columns = candidate_columns(candidates, everyone_encoded, self.global_rank, width)
        index = torch.from_numpy(columns).to(scores.device)
        logits = scores.gather(1, index).float()
        if self.negatives.config.cache:
            in_softmax = self._pool_mask(torch.from_numpy(candidates).to(scores.device))
            logits = torch.cat([logits, self._cached_logits(context_vectors, in_softmax)], dim=1)
        return F.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long, device=logits.device))

    def _encode_quotes(self, quote_ids: np.ndarray) -> torch.Tensor:
        return self.quote_encoder(self.quote_encoder.collate([self.quote_rows[q] for q in quote_ids]))

    def _pool_mask(self, quote_ids: torch.Tensor) -> torch.Tensor:
        """(rows, pool) True where a pool quote is among a row of `quote_ids` (rows, k)."""
        outside = len(self.negatives.pool)
        mask = torch.zeros((len(quote_ids), outside + 1), dtype=torch.bool, device=quote_ids.device)
        return mask.scatter_(1, self.pool_row[quote_ids], True)[:, :outside]

    def _cached_logits(self, context_vectors: torch.Tensor, in_softmax: torch.Tensor) -> torch.Tensor:
        """Every train quote as a negative too, from the epoch's vector cache (no gradient); -inf where
        `in_softmax` marks a quote the row scores already, so that it does not count twice."""
        if self.negatives.cached_vectors.device != context_vectors.device:
            # Once an epoch (and after loading a checkpoint), not with each step: the largest copy of a step.
            self.negatives.cached_vectors = self.negatives.cached_vectors.to(context_vectors.device)
        cached = (context_vectors @ self.negatives.cached_vectors.T).float()
        return cached.masked_fill(in_softmax, float("-inf"))

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
