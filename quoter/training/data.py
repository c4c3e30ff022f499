"""What training reads: the dataset's train and valid samples, the quotes known at training time, and the
LightningDataModule that serves batches of sample indices (the modules hold the tokenized rows)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from quoter.datasets import QuoteDataset, Sample
from quoter.errors import InputError
from quoter.quote_record import QuoteRecord
from quoter.training.batches import ResumableBatchSampler, ResumableLoader, index_tensor


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


class QuoteDataModule(pl.LightningDataModule):
    """Training batches of train-sample indices (resumable, optionally one context per quote per batch) and
    validation batches of valid-sample indices in file order."""

    def __init__(
        self, data: TrainingData, batch_size: int, valid_batch_size: int, seed: int, distinct_quotes: bool
    ) -> None:
        super().__init__()
        self.data = data
        self.valid_batch_size = valid_batch_size
        self.seed = seed
        self.sampler = ResumableBatchSampler([s.quote_id for s in data.train], batch_size, seed, distinct_quotes)

    def train_dataloader(self) -> ResumableLoader:
        """Resumable batches of train-sample indices; each DDP rank takes its own share."""
        if self.trainer is not None:
            self.sampler.rank, self.sampler.world_size = self.trainer.global_rank, self.trainer.world_size
        return ResumableLoader(self.sampler, self.seed)

    def val_dataloader(self) -> DataLoader:
        """Batches of valid-sample indices; every rank validates on all of them, so all agree on the MRR."""
        indices = range(len(self.data.valid))
        return DataLoader(indices, batch_size=self.valid_batch_size, shuffle=False, collate_fn=index_tensor)
