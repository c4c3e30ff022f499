"""Run one training stage with Lightning: hardware settings, logger, early stopping on the validation MRR,
selection of the best checkpoint, and resumption of a run that was killed."""

from __future__ import annotations

import contextlib
import json
import netrc
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger, Logger

from quoter.atomic_files import write_json_atomic
from quoter.errors import QuoterError
from quoter.progress import bars_drawn
from quoter.training.config import LoggerKind, RunConfig, StageConfig
from quoter.training.data import QuoteDataModule
from quoter.training.precision import auto_precision, training_attention
from quoter.training.resume import LAST_CHECKPOINT, ResumeCheckpoints
from quoter.training.stage_module import StageModule

MONITOR = "val_mrr"
DONE_FILE = "done.json"
BEST_FOLDER = "best"
# Warnings Lightning gives that are not for our users: torch's deprecations of what Lightning's own code does
# (its all_gather under DDP among them), when a run resumes, that the folder of the best checkpoint is not
# empty (it holds the best so far), and that modules are in eval mode.
LIGHTNING_NOISE = (
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
    r"Checkpoint directory .* exists and is not empty",
    # A frozen bottom runs in eval mode on purpose (quoter.encoders.frozen_layers).
    r"Found \d+ module\(s\) in eval mode at the start of training",
)


def hardware(run: RunConfig) -> dict[str, Any]:
    """Trainer arguments for the machine: GPUs, else CPU; the precision of run.precision ('auto': see
    quoter.training.precision); DDP when more than one process trains (several GPUs, or CPU processes over
    gloo), on each of run.num_nodes machines."""
    gpus = torch.cuda.device_count()
    precision = auto_precision() if run.precision == "auto" else run.precision
    # Sememe embeddings get no gradient in a batch without sememes, so DDP must allow unused parameters.
    strategy = "ddp_find_unused_parameters_true" if process_count(run) > 1 else "auto"
    return {
        "accelerator": "gpu" if gpus else "cpu",
        "devices": _devices(run),
        "num_nodes": run.num_nodes,
        "precision": precision,
        "strategy": strategy,
    }


def _devices(run: RunConfig) -> int | str:
    """run.devices for the Trainer: 'auto' is every GPU, or without GPUs Lightning's choice (one process)."""
    if run.devices == "auto":
        return torch.cuda.device_count() or "auto"
    return int(run.devices)  # RunConfig took only 'auto' or a number


def process_count(run: RunConfig) -> int:
    """How many processes a run trains in: its devices on each of its machines."""
    devices = _devices(run)
    return (devices if isinstance(devices, int) else 1) * run.num_nodes


def describe_hardware(run: RunConfig) -> str:
    """What a run trains on, for its log (Lightning's own report of it is left out as noise)."""
    chosen = hardware(run)
    nodes = f", nodes {run.num_nodes}" if run.num_nodes > 1 else ""
    return f"{chosen['accelerator']}, devices {chosen['devices']}{nodes}, precision {chosen['precision']}"


def build_logger(kind: LoggerKind, folder: Path, name: str) -> Logger | bool:
    """wandb (online when logged in, offline otherwise) if installed, else CSV; or what `kind` names."""
    if kind is LoggerKind.NONE:
        return False
    if kind in (LoggerKind.AUTO, LoggerKind.WANDB):
        try:
            from pytorch_lightning.loggers import WandbLogger

            return WandbLogger(project="quoter", name=name, save_dir=str(folder), offline=not _wandb_logged_in())
        except ModuleNotFoundError:
            if kind is LoggerKind.WANDB:
                raise QuoterError("run.logger: wandb is not installed; pip install wandb, or use csv") from None
    return CSVLogger(str(folder), name="logs")


def _wandb_logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


class WallClock(pl.Callback):
    """Logs `minutes`, the wall time since `started` (a time.perf_counter() value), with every validation: what
    a curve of validation MRR against training time reads."""

    def __init__(self, started: float) -> None:
        self.started = started

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        pl_module.log("minutes", (time.perf_counter() - self.started) / 60, rank_zero_only=True)


def run_stage(
    module: StageModule,
    datamodule: QuoteDataModule,
    stage: StageConfig,
    run: RunConfig,
    folder: Path,
    name: str,
    started: float | None = None,
) -> dict[str, float]:
    """Train one stage in `folder`, then leave the module with the weights of its best validation MRR; the
    minutes logged with each validation count from `started` (time.perf_counter(); None: the stage's start).

    A stage already finished there is not trained again (its best weights are loaded); an unfinished one
    resumes from its last checkpoint when run.resume is set. Returns the best validation metrics."""
    done = folder / DONE_FILE
    if run.resume and done.is_file():
        result = json.loads(done.read_text(encoding="utf-8"))
        _load_weights(module, Path(result["checkpoint"]))
        return result["metrics"]
    best = ModelCheckpoint(
        dirpath=folder / BEST_FOLDER,
        filename="best",
        monitor=MONITOR,
        mode="max",
        save_top_k=1,
        save_weights_only=True,
        enable_version_counter=False,
    )
    machine = hardware(run)
    trainer = pl.Trainer(
        max_epochs=stage.epochs,
        max_steps=stage.max_steps,
        **_validation_schedule(stage, run, datamodule.sampler.batches_per_rank(process_count(run))),
        accumulate_grad_batches=run.accumulate_grad_batches,
        callbacks=[
            ResumeCheckpoints(folder, run.checkpoint_every, datamodule.sampler),
            best,
            EarlyStopping(MONITOR, mode="max", patience=stage.patience),
            WallClock(time.perf_counter() if started is None else started),
        ],
        logger=build_logger(run.logger, folder, name),
        # Lightning's bar would print its last state into a log file or a pipe.
        enable_progress_bar=bars_drawn(run.progress_bar),
        enable_model_summary=False,
        num_sanity_val_steps=0,
        # The resumable sampler shards batches across ranks itself.
        use_distributed_sampler=False,
        default_root_dir=str(folder),
        log_every_n_steps=10,
        **machine,
    )
    last = folder / LAST_CHECKPOINT
    # Pretrained models load in eval mode, and Lightning keeps the modes it finds: switch dropout on.
    module.train()
    with warnings.catch_warnings(), training_attention(module, machine["accelerator"] == "cpu", machine["precision"]):
        for noise in LIGHTNING_NOISE:
            warnings.filterwarnings("ignore", message=noise)
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(last) if run.resume and last.is_file() else None)
    if not best.best_model_path:
        raise QuoterError(f"{name}: training stopped before its first validation; raise the step limit")
    metrics = {MONITOR: float(best.best_model_score), "epochs": trainer.current_epoch, "steps": trainer.global_step}
    _load_weights(module, Path(best.best_model_path))
    # A finished stage is never trained again (a resumed run loads its best weights), so its last state goes.
    # Under DDP one process keeps the records.
    if trainer.is_global_zero:
        write_json_atomic(done, {"checkpoint": best.best_model_path, "metrics": metrics})
        last.unlink(missing_ok=True)
    return metrics


def stage_has_checkpoints(folder: Path) -> bool:
    """Whether the stage in `folder` saved anything that a resumed run goes on from: its last state, its
    best weights or the record that it finished."""
    saved = (folder / LAST_CHECKPOINT).is_file() or (folder / DONE_FILE).is_file()
    return saved or any((folder / BEST_FOLDER).glob("*.ckpt"))


def remove_stage_checkpoints(folder: Path) -> None:
    """Delete a stage's checkpoints and the record that it finished (which names its best checkpoint), but not
    its logs; then the folder, if nothing else is left in it."""
    shutil.rmtree(folder / BEST_FOLDER, ignore_errors=True)
    for name in (LAST_CHECKPOINT, DONE_FILE):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _validation_schedule(stage: StageConfig, run: RunConfig, batches_per_epoch: int) -> dict[str, Any]:
    """Validate every `validate_every` optimizer steps, or else at the end of each epoch; and when the step
    limit ends training before the first of those, at that step (counted in batches across epochs, which holds
    on every DDP rank): a stage must validate at least once to keep its best weights."""
    limit = stage.max_steps * run.accumulate_grad_batches
    if stage.validate_every is not None:
        every = min(stage.validate_every * run.accumulate_grad_batches, stage.epochs * batches_per_epoch)
        return {"val_check_interval": min(every, limit) if limit > 0 else every, "check_val_every_n_epoch": None}
    if 0 < limit < batches_per_epoch:
        return {"val_check_interval": limit, "check_val_every_n_epoch": None}
    return {}


def _load_weights(module: StageModule, checkpoint: Path) -> None:
    module.load_saved_weights(torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"])
