"""What training reads: the dataset's train and valid samples, the quotes known at training time, and the
LightningDataModule that owns them: it tokenizes each context once, and its collators turn batches of
sample indices into batches the context encoder takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from quoter.datasets import QuoteDataset, Sample
from quoter.encoders.context_encoder import ContextBatch, ContextEncoder
from quoter.errors import InputError
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from quoter.training.batches import ResumableBatchSampler, ResumableLoader


@dataclass
class TrainingData:
    """Train samples, valid samples (evenly thinned to at most `max_valid`) and the quote set.

    `train_quote_ids` are the quotes of the train split, in id order: the only quotes training may use as
    negatives, so valid- and test-only quotes stay unseen until evaluation."""

    records: list[QuoteRecord]  # the quote set with sources and glosses, in id order
    train: list[Sample]
    valid: list[Sample]
    train_quote_ids: np.ndarray

    @cached_property
    def quotes(self) -> list[str]:
        """The quote texts, in id order."""
        return [record.text for record in self.records]

    @classmethod
    def from_dataset(cls, dataset: QuoteDataset, max_valid: int | None = None) -> TrainingData:
        """Split a dataset for training; both splits must be non-empty."""
        train, valid = dataset.split("train"), dataset.split("valid")
        if not train:
            raise InputError("the 'train' split is empty; nothing to train on", path=dataset.path)
        if not valid:
            raise InputError("the 'valid' split is empty; training needs it for early stopping", path=dataset.path)
        if max_valid is not None and len(valid) > max_valid:
            picks = np.linspace(0, len(valid) - 1, max_valid).round().astype(int)
            valid = [valid[i] for i in picks]
        train_quote_ids = np.flatnonzero(dataset.quote_counts("train") > 0)
        return cls(dataset.quote_records(), train, valid, train_quote_ids)


@dataclass(frozen=True)
class SampleBatch:
    """Samples of one split ready for the context encoder: their indices in the split (which seed their
    random negatives), their gold quote ids and their padded contexts."""

    sample_ids: list[int]
    quote_ids: list[int]
    contexts: ContextBatch

    def __len__(self) -> int:
        return len(self.sample_ids)

    def to(self, device: torch.device) -> SampleBatch:
        """The batch with its context tensors on `device` (how Lightning moves a batch to the model)."""
        c = self.contexts
        moved = [tensor.to(device) for tensor in (c.input_ids, c.attention_mask, c.token_type_ids, c.positions)]
        return replace(self, contexts=ContextBatch(*moved))


class SampleCollator:
    """Tokenizes the contexts of a split once, when made; then turns each batch of sample indices into a
    SampleBatch, padding only that batch's rows."""

    def __init__(self, encoder: ContextEncoder, samples: Sequence[Sample]) -> None:
        self.encoder = encoder
        self.rows = encoder.rows([Query(sample.left, sample.right) for sample in samples])
        self.quote_ids = [sample.quote_id for sample in samples]

    def __call__(self, indices: list[int]) -> SampleBatch:
        rows = [self.rows[i] for i in indices]
        return SampleBatch(list(indices), [self.quote_ids[i] for i in indices], self.encoder.collate(rows))


class QuoteDataModule(pl.LightningDataModule):
    """The samples of a training stage, tokenized once by `encoder` in setup: resumable training batches
    (optionally one context per quote per batch) and validation batches in file order, both SampleBatches."""

    def __init__(
        self,
        data: TrainingData,
        encoder: ContextEncoder,
        batch_size: int,
        valid_batch_size: int,
        seed: int,
        distinct_quotes: bool,
    ) -> None:
        super().__init__()
        self.data = data
        self.encoder = encoder
        self.valid_batch_size = valid_batch_size
        self.seed = seed
        self.sampler = ResumableBatchSampler([s.quote_id for s in data.train], batch_size, seed, distinct_quotes)
        self._collators: dict[str, SampleCollator] = {}

    def setup(self, stage: str) -> None:
        """Tokenize the train and valid contexts; only the first time, though every fit calls this."""
        if not self._collators:
            self._collators = {
                "train": SampleCollator(self.encoder, self.data.train),
                "valid": SampleCollator(self.encoder, self.data.valid),
            }

    def train_dataloader(self) -> ResumableLoader:
        """Resumable batches of train samples; each DDP rank takes its own share."""
        if self.trainer is not None:
            self.sampler.rank, self.sampler.world_size = self.trainer.global_rank, self.trainer.world_size
        return ResumableLoader(self.sampler, self.seed, self._collators["train"])

    def val_dataloader(self) -> DataLoader:
        """Batches of valid samples; every rank validates on all of them, so all agree on the MRR."""
        indices = range(len(self.data.valid))
        return DataLoader(indices, batch_size=self.valid_batch_size, shuffle=False, collate_fn=self._collators["valid"])
