"""What training reads: the dataset's train and valid samples, the quotes known at training time, and the
LightningDataModule that owns them: it tokenizes each context once (and, with a frozen bottom, keeps its
output: layer_cache.py), and its collators turn batches of sample indices into batches the context encoder
takes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from quoter.datasets import QuoteDataset, Sample
from quoter.encoders.batching import encode_rows
from quoter.encoders.context_encoder import ContextBatch, ContextEncoder
from quoter.errors import InputError
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from quoter.training.batches import ResumableBatchSampler, ResumableLoader
from quoter.training.layer_cache import LayerCache


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
        """The batch with its context tensors on `device` (how Lightning moves a batch to the model); from
        pinned memory the copy does not wait."""
        return self._mapped(lambda tensor: tensor.to(device, non_blocking=True))

    def pin_memory(self) -> SampleBatch:
        """The batch in page-locked memory (how a DataLoader with pin_memory prepares a GPU's batches)."""
        return self._mapped(torch.Tensor.pin_memory)

    def _mapped(self, change: Callable[[torch.Tensor], torch.Tensor]) -> SampleBatch:
        c = self.contexts
        tensors = [change(tensor) for tensor in (c.input_ids, c.attention_mask, c.token_type_ids, c.positions)]
        states = None if c.states is None else change(c.states)
        return replace(self, contexts=ContextBatch(*tensors, states=states))


class SampleCollator:
    """Tokenizes the contexts of a split once, when made, and with a `cache_folder` keeps the output of the
    encoder's frozen bottom for each (LayerCache); then turns each batch of sample indices into a SampleBatch,
    padding only that batch's rows."""

    def __init__(self, encoder: ContextEncoder, samples: Sequence[Sample], cache_folder: Path | None = None) -> None:
        self.encoder = encoder
        self.rows = encoder.rows([Query(sample.left, sample.right) for sample in samples])
        self.quote_ids = [sample.quote_id for sample in samples]
        self.cache = None
        if cache_folder is not None and encoder.frozen_layers:
            self.cache = LayerCache.build(encoder, self.rows, cache_folder)

    def encode(self, batch_size: int) -> np.ndarray:
        """Every sample's context vector, float32 and in order, by the encoder in eval mode without gradients,
        in batches of similar length; from the kept states where there are some, which gives the vectors that
        running the whole encoder would, at the cost of its top alone."""
        device = self.encoder.model.device
        return encode_rows(
            self.encoder,
            range(len(self.rows)),
            lambda index: len(self.rows[index].input_ids),
            lambda indices: self(list(indices)).to(device).contexts,
            batch_size,
            self.encoder.model.config.hidden_size,
        )

    def __call__(self, indices: list[int]) -> SampleBatch:
        # On the CPU: the loader may pin the batch, and Lightning moves it to the model's device.
        contexts = self.encoder.collate([self.rows[i] for i in indices], device="cpu")
        if self.cache is not None:
            contexts = replace(contexts, states=self.cache.padded(indices, contexts.input_ids.shape[1]))
        return SampleBatch(list(indices), [self.quote_ids[i] for i in indices], contexts)


class QuoteDataModule(pl.LightningDataModule):
    """The samples of a training stage, tokenized once by `encoder` in setup (with a `cache_folder`, the
    output of its frozen bottom kept there): resumable training batches (optionally one context per quote per
    batch) and validation batches in file order, both SampleBatches."""

    def __init__(
        self,
        data: TrainingData,
        encoder: ContextEncoder,
        batch_size: int,
        valid_batch_size: int,
        seed: int,
        distinct_quotes: bool,
        cache_folder: Path | None = None,
    ) -> None:
        super().__init__()
        self.data = data
        self.encoder = encoder
        self.cache_folder = cache_folder
        self.valid_batch_size = valid_batch_size
        self.seed = seed
        self.sampler = ResumableBatchSampler([s.quote_id for s in data.train], batch_size, seed, distinct_quotes)
        self._collators: dict[str, SampleCollator] = {}

    def setup(self, stage: str) -> None:
        """Tokenize the train and valid contexts; only the first time, though every fit calls this."""
        if not self._collators:
            self._collators = {
                "train": SampleCollator(self.encoder, self.data.train, self.cache_folder),
                "valid": SampleCollator(self.encoder, self.data.valid, self.cache_folder),
            }

    def train_dataloader(self) -> ResumableLoader:
        """Resumable batches of train samples; each DDP rank takes its own share."""
        if self.trainer is not None:
            self.sampler.rank, self.sampler.world_size = self.trainer.global_rank, self.trainer.world_size
        return ResumableLoader(self.sampler, self.seed, self._collators["train"], pin_memory=self._on_gpu())

    def val_dataloader(self) -> DataLoader:
        """Batches of valid samples; every rank validates on all of them, so all agree on the MRR."""
        indices = range(len(self.data.valid))
        collate = self._collators["valid"]
        return DataLoader(indices, self.valid_batch_size, shuffle=False, collate_fn=collate, pin_memory=self._on_gpu())

    def _on_gpu(self) -> bool:
        """Whether the batches go to a GPU: they are then made in pinned memory, which copies without waiting."""
        return self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"
