"""What both training stages share: a training step on a batch of samples, exact validation MRR over the full
quote set, and AdamW with a linearly declining learning rate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pytorch_lightning as pl
import torch

from quoter.encoders.context_encoder import ContextEncoder
from quoter.metrics import rank_metrics
from quoter.training.config import StageConfig
from quoter.training.data import SampleBatch
from quoter.training.distributed import world_size

VALID_METRICS = ("mrr", "recall@1", "recall@10", "recall@100")


class StageModule(pl.LightningModule, ABC):
    """A training stage of the context encoder (and, in stage 1, the quote encoder) on the batches of a
    QuoteDataModule; subclasses define the loss of a batch of train samples and the quote vectors validation
    ranks against."""

    def __init__(self, context_encoder: ContextEncoder, stage: StageConfig) -> None:
        super().__init__()
        self.context_encoder = context_encoder
        self.stage = stage
        self._valid_quote_vectors = torch.zeros(0)
        self._valid_ranks: list[torch.Tensor] = []

    @abstractmethod
    def batch_loss(self, batch: SampleBatch) -> torch.Tensor:
        """Mean cross-entropy of a batch of train samples."""

    @abstractmethod
    def all_quote_vectors(self) -> torch.Tensor:
        """Vectors of every quote of the dataset (valid- and test-only ones too), for validation."""

    def training_step(self, batch: SampleBatch, batch_idx: int) -> torch.Tensor:
        loss = self.batch_loss(batch)
        if world_size() > 1:
            loss = loss * self._share_of_batch(len(batch))
        # Under DDP the mean of the processes' weighted losses: the loss over all their contexts.
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch), sync_dist=True)
        return loss

    def _share_of_batch(self, rows: int) -> torch.Tensor:
        """world_size * rows / the rows of all processes. DDP averages the processes' gradients: each process's
        mean loss weighed by this makes that average the gradient of the mean over all their rows, whatever
        each batch's size. Stays on the device (no wait for the GPU)."""
        sizes = self.all_gather(torch.full((), float(rows), device=self.device))
        return len(sizes) * rows / sizes.sum()

    def on_validation_epoch_start(self) -> None:
        self._valid_quote_vectors = self.all_quote_vectors().float().to(self.device)
        self._valid_ranks = []

    def validation_step(self, batch: SampleBatch, batch_idx: int) -> None:
        vectors = self.context_encoder(batch.contexts).float()
        # Scores in float32 even under bf16 autocast: ranks are exact, and bf16 would make many ties.
        with torch.autocast(self.device.type, enabled=False):
            scores = vectors @ self._valid_quote_vectors.T
        golds = torch.tensor(batch.quote_ids, device=scores.device)
        self._valid_ranks.append(gold_ranks(scores, golds))

    def on_validation_epoch_end(self) -> None:
        # Exact metrics over all valid contexts at once, never averaged per batch; every DDP process ranks
        # them all, and the reduction keeps the values the same to the last bit in each, which early
        # stopping and the best checkpoint's choice need.
        metrics = rank_metrics(torch.cat(self._valid_ranks).cpu().numpy())
        for name in VALID_METRICS:
            self.log(f"val_{name}", metrics[name], prog_bar=name == "mrr", sync_dist=True)
        self._valid_ranks = []

    def _frozen_names(self) -> set[str]:
        return {name for name, parameter in self.named_parameters() if not parameter.requires_grad}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Frozen weights keep the pretrained values every run starts from: a checkpoint need not copy them
        # (a multilingual model's word embeddings are most of its size).
        for name in self._frozen_names():
            checkpoint["state_dict"].pop(name, None)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["state_dict"] = self._with_frozen(checkpoint["state_dict"])

    def load_saved_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load weights saved in a checkpoint of this stage, which leaves out the frozen ones."""
        self.load_state_dict(self._with_frozen(state_dict))

    def _with_frozen(self, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        frozen = self._frozen_names()
        return {**{name: value for name, value in self.state_dict().items() if name in frozen}, **state_dict}

    def parameter_groups(self) -> list[dict[str, Any]]:
        """The optimizer's parameter groups: every trainable parameter at the stage's learning rate."""
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    def configure_optimizers(self):
        # Fused: one kernel updates every parameter, about 3 times faster than the default on a CPU, where the
        # update of 20M trainable weights is a tenth of a small model's step.
        optimizer = torch.optim.AdamW(
            self.parameter_groups(), lr=self.stage.lr, weight_decay=self.stage.weight_decay, fused=True
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = int(total * self.stage.warmup_fraction)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(1, total - warmup))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def gold_ranks(scores: torch.Tensor, golds: torch.Tensor) -> torch.Tensor:
    """quoter.metrics.ranks_from_scores on the scores' device: each row's 1-based rank of its gold quote,
    ties counting against it (1 + the other quotes scoring at least as high), NaN scores as -inf."""
    scores = scores.masked_fill(scores.isnan(), float("-inf"))
    gold_scores = scores.gather(1, golds[:, None])
    return (scores >= gold_scores).sum(dim=1)
