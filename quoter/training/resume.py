"""Checkpoints a killed run resumes from exactly: written every few optimizer steps and after each
validation, they hold (through Lightning) weights, optimizer, scheduler and loop progress, and (through this
callback) the batch sampler's position and the random number generators that dropout draws from.

The sampler's position travels in this callback's state rather than only in the loader's: Lightning 2.6
builds the train loader early when the optimizer asks for the number of steps, and then never hands the
loader its saved state; callback states are restored before the first batch is drawn."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from quoter.training.batches import ResumableBatchSampler

LAST_CHECKPOINT = "last.ckpt"


class ResumeCheckpoints(pl.Callback):
    """Counts trained batches for the resumable loader, saves `folder/last.ckpt` every `every` optimizer
    steps and after each validation (atomically), and restores the RNG states when a run resumes."""

    def __init__(self, folder: Path, every: int, sampler: ResumableBatchSampler) -> None:
        self.folder = folder
        self.sampler = sampler
        self.every = every
        self._last_saved_step = -1
        self._loaded_rng: dict[str, Any] | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._loaded_rng is not None:
            _set_rng_state(self._loaded_rng)
            self._loaded_rng = None

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning sets the epoch of a loader's sampler, not of its batch sampler; this hook runs before the
        # epoch's iterator is made (and not at all when a run resumes mid-epoch, whose state is loaded).
        self.sampler.set_epoch(trainer.current_epoch)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        # Count first: the checkpoint must already include this batch as trained on.
        self.sampler.mark_consumed()
        # Only right after an optimizer step: gradients accumulated so far are not in a checkpoint.
        stepped = self.sampler.consumed % trainer.accumulate_grad_batches == 0
        step = trainer.global_step
        if stepped and step % self.every == 0 and step != self._last_saved_step:
            self.save(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.save(trainer)

    def save(self, trainer: pl.Trainer) -> None:
        """Write last.ckpt through a temporary file, so a kill while writing leaves the previous one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self.folder / f".{LAST_CHECKPOINT}.tmp"
        # The full state (optimizer, loops, callbacks) is what makes resumption exact; saying so also
        # keeps Lightning from logging its default at every save.
        trainer.save_checkpoint(temporary, weights_only=False)
        if trainer.is_global_zero:
            os.replace(temporary, self.folder / LAST_CHECKPOINT)
        self._last_saved_step = trainer.global_step

    def state_dict(self) -> dict[str, Any]:
        return {"rng": _rng_state(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Applied at train start: what runs between loading and training may draw random numbers.
        self._loaded_rng = state_dict["rng"]
        self.sampler.load_state_dict(state_dict["sampler"])


def _rng_state() -> dict[str, Any]:
    # Plain lists and tensors only: checkpoints may be loaded with torch.load(weights_only=True).
    name, keys, position, has_gauss, cached = np.random.get_state()
    numpy_state = [name, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached]
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
