"""Training batches that can be resumed exactly: each epoch's order is a function of (seed, epoch), and the
loader's state is the epoch and the number of batches already trained on, which a checkpoint stores.

With `distinct_quotes`, no batch holds two contexts of the same quote, so the other contexts' gold quotes
are true negatives (in-batch negatives)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler


def shuffled_batches(
    quote_ids: Sequence[int], batch_size: int, seed: int, epoch: int, distinct: bool
) -> list[list[int]]:
    """All sample indices in batches of `batch_size` (the last may be smaller), in a random order of (seed,
    epoch). With `distinct`, samples are dealt greedily into the first open batch that lacks their quote,
    which keeps batches full unless one quote has more contexts than there are batches."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(quote_ids)).tolist()
    if not distinct:
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    quotes_of: list[set[int]] = []
    open_batches: list[int] = []  # indices of batches not yet full, in creation order
    for index in order:
        quote = quote_ids[index]
        slot = next((b for b in open_batches if quote not in quotes_of[b]), None)
        if slot is None:
            batches.append([])
            quotes_of.append(set())
            open_batches.append(len(batches) - 1)
            slot = len(batches) - 1
        batches[slot].append(index)
        quotes_of[slot].add(quote)
        if len(batches[slot]) == batch_size:
            open_batches.remove(slot)
    # Full batches first in their random order; the few partial ones at the end of the epoch.
    return sorted(batches, key=lambda batch: len(batch) < batch_size)


class ResumableBatchSampler(Sampler[list[int]]):
    """Yields an epoch's batches, skipping those already trained on when resumed; under DDP each rank takes
    every world_size-th batch, and the last len % world_size batches of the epoch are left out: a rank with
    one batch more than the others would wait for their gradients forever."""

    def __init__(self, quote_ids: Sequence[int], batch_size: int, seed: int, distinct_quotes: bool) -> None:
        self.quote_ids = list(quote_ids)
        self.batch_size = batch_size
        self.seed = seed
        self.distinct_quotes = distinct_quotes
        self.epoch = 0
        self.consumed = 0
        self.rank = 0
        self.world_size = 1

    def set_epoch(self, epoch: int) -> None:
        """Called before each epoch; a new epoch starts from its first batch."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.consumed = 0

    def _batches(self) -> list[list[int]]:
        return shuffled_batches(self.quote_ids, self.batch_size, self.seed, self.epoch, self.distinct_quotes)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._batches()
        usable = len(batches) - len(batches) % self.world_size
        yield from batches[self.rank : usable : self.world_size][self.consumed :]

    def __len__(self) -> int:
        return self.batches_per_rank(self.world_size)

    def batches_per_rank(self, world_size: int) -> int:
        """How many batches of this epoch each of `world_size` ranks trains on."""
        return len(self._batches()) // world_size

    def mark_consumed(self) -> None:
        """Count one batch as trained on (called after each training batch, before any checkpoint)."""
        self.consumed += 1

    def state_dict(self) -> dict[str, int]:
        """The epoch and how many of its batches were trained on."""
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue after the batches a checkpoint had already trained on."""
        self.epoch = int(state["epoch"])
        self.consumed = int(state["consumed"])


class ResumableLoader(DataLoader):
    """A DataLoader over the resumable batch sampler, whose state Lightning saves in checkpoints and restores;
    `collate` turns each batch of sample indices into what the model takes; with `pin_memory` (for a GPU), the
    batches go into page-locked memory, from which they copy to the GPU without waiting for it."""

    def __init__(
        self,
        batch_sampler: ResumableBatchSampler,
        seed: int,
        collate: Callable[[list[int]], Any],
        pin_memory: bool = False,
    ) -> None:
        # The loader's own generator keeps iterator creation from consuming the global torch RNG, whose
        # state is restored on resume and must match an uninterrupted run.
        super().__init__(
            range(len(batch_sampler.quote_ids)),
            batch_sampler=batch_sampler,
            collate_fn=collate,
            generator=torch.Generator().manual_seed(seed),
            pin_memory=pin_memory,
        )

    def state_dict(self) -> dict[str, Any]:
        """The batch sampler's state."""
        return self.batch_sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the batch sampler's state."""
        self.batch_sampler.load_state_dict(state)
