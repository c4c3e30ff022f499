"""Stage 1's negative quotes for each context, drawn only from quotes of the train split.

In order: the other gold quotes of the batch (in-batch negatives, at most count - hard of them), then hard
negatives (quotes near the gold quote by the current quote vectors, mined again each epoch), then random
quotes. The random draws of a sample are a function of (seed, epoch, sample index), so a resumed run draws
exactly what an uninterrupted one would."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from quoter.errors import QuoterError
from quoter.training.config import NegativeConfig


class NegativeSampler:
    """Chooses `config.count` distinct negative quote ids per context, never the gold quote."""

    def __init__(self, train_quote_ids: np.ndarray, config: NegativeConfig, seed: int) -> None:
        self.pool = np.asarray(train_quote_ids, dtype=np.int64)
        if len(self.pool) < config.count + 1:
            raise QuoterError(
                f"negatives.count: {config.count} negatives need at least {config.count + 1} quotes in the train "
                f"split, which has {len(self.pool)}; lower negatives.count"
            )
        self.config = config
        self.seed = seed
        self._row_of = {int(quote): row for row, quote in enumerate(self.pool)}
        # Row r: the train quotes nearest train quote pool[r], nearest first; empty until mined.
        self.hard_table = np.zeros((0, 0), dtype=np.int64)
        self.mined_epoch = -1
        # With config.cache: the pool's vectors at the start of the epoch, a row per quote of `pool` (on the
        # training device once JointModule moved them there).
        self.cached_vectors = torch.zeros(0)

    def needs_mining(self, epoch: int) -> bool:
        """Whether hard negatives or the vector cache are wanted and not made yet for this epoch."""
        return (self.config.hard > 0 or self.config.cache) and self.mined_epoch != epoch

    def mine(self, pool_vectors: np.ndarray, epoch: int) -> None:
        """From this epoch's vectors of the train quotes (one row per quote of `pool`, in its order): keep them
        as the cache, and find each one's nearest other train quotes by inner product, after the hard_skip
        nearest, as its hard negatives (each only where the config asks for it)."""
        vectors = torch.from_numpy(np.ascontiguousarray(pool_vectors, dtype=np.float32))
        self.mined_epoch = epoch
        if self.config.cache:
            self.cached_vectors = vectors
        if not self.config.hard:
            return
        similarity = vectors @ vectors.T
        similarity.fill_diagonal_(float("-inf"))
        skip = min(self.config.hard_skip, len(self.pool) - 2)
        width = min(skip + self.config.hard_pool, len(self.pool) - 1)
        nearest = similarity.topk(width, dim=1).indices.numpy()[:, skip:]
        self.hard_table = self.pool[nearest]

    def sample(
        self, sample_ids: Sequence[int], gold_ids: Sequence[int], epoch: int, batch_golds: Sequence[int] | None = None
    ) -> np.ndarray:
        """Negative quote ids, shape (len(sample_ids), count), for the contexts of one batch; in-batch negatives
        come from `batch_golds` (None: gold_ids), under DDP the gold quotes of every process's batch."""
        if self.needs_mining(epoch):
            raise RuntimeError(f"hard negatives or cached vectors of epoch {epoch} were not made")
        batch_golds = gold_ids if batch_golds is None else batch_golds
        rows = [self._one(int(s), int(g), batch_golds, epoch) for s, g in zip(sample_ids, gold_ids)]
        return np.array(rows, dtype=np.int64).reshape(len(rows), self.config.count)

    def _one(self, sample_id: int, gold: int, batch_golds: Sequence[int], epoch: int) -> list[int]:
        rng = np.random.default_rng([self.seed, epoch, sample_id])
        count = self.config.count
        chosen: list[int] = []
        taken = {gold}

        def take(candidates: Sequence[int], limit: int) -> None:
            for quote in candidates:
                if len(chosen) >= limit:
                    return
                if quote not in taken:
                    chosen.append(quote)
                    taken.add(quote)

        # In-batch negatives leave the hard ones their places: a batch often has `count` other quotes.
        if self.config.in_batch:
            take([int(q) for q in batch_golds], count - self.config.hard)
        if self.config.hard:
            near = self.hard_table[self._row_of[gold]]
            take(rng.permutation(near).tolist(), min(count, len(chosen) + self.config.hard))
        while len(chosen) < count:
            take(rng.choice(self.pool, size=2 * (count - len(chosen))).tolist(), count)
        return chosen

    def state_dict(self) -> dict[str, object]:
        """The mined table, the vector cache and their epoch, so a run resumed mid-epoch uses the same ones."""
        return {
            "epoch": self.mined_epoch,
            "table": torch.from_numpy(self.hard_table.copy()),
            # On the host: a checkpoint must load on a machine without the training's GPU.
            "cache": self.cached_vectors.cpu(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore what `state_dict` returned."""
        self.mined_epoch = int(state["epoch"])
        self.hard_table = state["table"].numpy().astype(np.int64)
        self.cached_vectors = state["cache"]
