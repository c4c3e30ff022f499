"""A whole training run: read the data, build both encoders, run stage 1 then stage 2 (each may be turned
off for the ablations), and write the Bundle."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl

from quoter.bundle import Bundle, check_bundle_output
from quoter.datasets import Sample, load_dataset
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.factory import EncoderRecipe, pretrained_encoders
from quoter.encoders.frozen_layers import set_dropout
from quoter.encoders.model_sources import default_model
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import QuoterError
from quoter.fusion import FusionRule
from quoter.hybrid_bundle import make_hybrid
from quoter.languages import Language, choose_language
from quoter.quote_set import encode_quote_set
from quoter.sememes.alignment import SememeAnnotator
from quoter.sememes.sources import load_lexicon
from quoter.training.config import TrainConfig, config_to_dict
from quoter.training.data import QuoteDataModule, SampleCollator, TrainingData
from quoter.training.distributed import launching_process, wait_for_all
from quoter.training.joint_module import JointModule
from quoter.training.negatives import NegativeSampler
from quoter.training.retrain_module import RetrainModule
from quoter.training.trainer import describe_hardware, remove_stage_checkpoints, run_stage, stage_has_checkpoints

CONFIG_FILE = "config.json"
# Settings that may change when a run is resumed: they do not change what is trained.
RESUME_FREE = ("resume", "progress_bar", "logger", "output", "checkpoints", "keep_checkpoints")
# The checkpoint folder's subfolder of each stage.
JOINT_FOLDER = "joint"
RETRAIN_FOLDER = "retrain"
# The checkpoint folder's subfolder of the frozen layers' kept output, which both stages read.
LAYER_CACHE_FOLDER = "layer_cache"


@dataclass
class Encoders:
    """The two encoders of a run and the name of the model they start from."""

    model: str
    context: ContextEncoder
    quote: QuoteEncoder


def build_encoders(config: TrainConfig, language: Language) -> Encoders:
    """Both encoders from the same pretrained model (two copies: stage 1 trains them apart). Sememes are
    used only when stage 1 runs: it alone trains the quote encoder, so without it the randomly initialised
    sememe embeddings would only add noise to the quote vectors (-SimTrain and BERT-Sim have none)."""
    name = config.model.name or default_model(language)
    sememes = config.sememes
    annotator = None
    if sememes.source is not None and sememes.alpha > 0 and config.joint.enabled:
        annotator = SememeAnnotator(load_lexicon(sememes, language), language)
    recipe = EncoderRecipe(
        pooling=config.model.pooling,
        gap=config.model.gap,
        scale=config.model.scale,
        context_max_length=config.model.context_max_length,
        quote_max_length=config.model.quote_max_length,
        gloss=config.model.gloss,
        alpha=sememes.alpha if annotator else 0.0,
    )
    context, quote = pretrained_encoders(name, recipe, annotator)
    for encoder in (context, quote):
        if config.model.dropout is not None:
            set_dropout(encoder.model, config.model.dropout)
        if config.model.freeze_word_embeddings:
            encoder.model.get_input_embeddings().requires_grad_(False)
        if config.model.freeze_layers:
            encoder.freeze_bottom(config.model.freeze_layers)
    return Encoders(name, context, quote)


def checkpoint_folder(config: TrainConfig) -> Path:
    """run.checkpoints, else OUTPUT.checkpoints beside the output folder."""
    if config.run.checkpoints is not None:
        return Path(config.run.checkpoints)
    return Path(f"{Path(config.run.output).resolve()}.checkpoints")


def kept_states_folder(config: TrainConfig, folder: Path) -> Path | None:
    """Where a run keeps its frozen layers' output (in its checkpoint folder `folder`), None when it does not
    (model.cache_frozen_layers false; with no frozen layers nothing is kept)."""
    return folder / LAYER_CACHE_FOLDER if config.model.cache_frozen_layers else None


def holds_checkpoints(folder: Path) -> bool:
    """Whether a run saved, in its checkpoint folder, anything that a resumed run would go on from."""
    return any(stage_has_checkpoints(folder / stage) for stage in (JOINT_FOLDER, RETRAIN_FOLDER))


def claim_folder(folder: Path, config: TrainConfig) -> None:
    """Record the run's settings in its checkpoint folder; resuming a run made with other settings is an
    error, since its checkpoints would silently continue the wrong run. A run that stopped before its first
    checkpoint left nothing to continue: its record is replaced, whatever its settings were."""
    settings = config_to_dict(config)
    for key in RESUME_FREE:
        settings["run"].pop(key)
    path = folder / CONFIG_FILE
    if config.run.resume and path.is_file() and holds_checkpoints(folder):
        if json.loads(path.read_text(encoding="utf-8")) != settings:
            raise QuoterError(
                f"run.checkpoints: {folder} holds a run with other settings; delete it, choose another folder, "
                "or set run.resume=false to start over"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def remove_checkpoints(folder: Path) -> None:
    """Delete a run's checkpoints and its record of settings, keeping its logs; then the folder, if that left it
    empty (run.checkpoints may name a folder that holds other files too)."""
    for stage in (JOINT_FOLDER, RETRAIN_FOLDER):
        remove_stage_checkpoints(folder / stage)
    shutil.rmtree(folder / LAYER_CACHE_FOLDER, ignore_errors=True)
    (folder / CONFIG_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def train(config: TrainConfig, log: Callable[[str], None] = print) -> Bundle | None:
    """Train as configured, write the bundle to run.output and return it.

    Under DDP every process runs this (Lightning runs the command again for each): the one that launched the
    run checks and claims the checkpoint folder, logs, and encodes, fuses and writes the bundle; the others
    train alongside it and return None."""
    launching = launching_process()
    if not launching:
        log = _silent
    if config.data.path is None:
        raise QuoterError("data.path: no training data given (--data FILE)")
    if config.run.output is None:
        raise QuoterError("run.output: no output folder given (--output DIR)")
    if launching:  # the bundle replaces the folder: refused now, not after the training, if it is not one
        check_bundle_output(Path(config.run.output), "--output")
    started = time.perf_counter()
    dataset = load_dataset(config.data.path, config.data.splits, config.data.part, config.data.glosses)
    language, reason = choose_language(config.data.language, config.data.part, dataset.text_sample())
    data = TrainingData.from_dataset(dataset, config.validation.max_samples)
    log(
        f"{config.data.path}: {len(data.train):,} train and {len(data.valid):,} valid contexts, "
        f"{len(data.quotes):,} quotes ({len(data.train_quote_ids):,} in train); language {language.value} ({reason})"
    )
    folder = checkpoint_folder(config)
    # The other processes start once the launching one trains, in the folder it claimed (and may have saved in).
    if launching:
        if not config.run.resume and holds_checkpoints(folder):
            raise QuoterError(
                f"run.checkpoints: {folder} holds the checkpoints of a run; delete it or set run.resume=true to "
                "continue it"
            )
        claim_folder(folder, config)
    log(f"training on {describe_hardware(config.run)}")
    pl.seed_everything(config.run.seed, workers=True, verbose=False)
    encoders = build_encoders(config, language)
    if config.sememes.source is not None and config.sememes.alpha > 0 and not config.joint.enabled:
        log("stage 1 is off, so the quote encoder is not trained: no sememes (their embeddings would stay random)")
    metrics = train_stages(config, encoders, data, folder, log, started)
    # The others may still be loading the best checkpoints, which the launching process deletes below.
    wait_for_all()
    if not launching:
        return None
    log("encoding the quote set with the final quote encoder")
    final = encode_quote_set(encoders.quote, data.records)
    info: dict[str, Any] = {
        "model": encoders.model,
        "trained": True,
        "data": str(config.data.path),
        "validation": metrics,
        "train_seconds": round(time.perf_counter() - started, 1),
        "config": config_to_dict(config),
    }
    bundle = Bundle(language, encoders.context, encoders.quote, final.records, final.vectors, info=info)
    if config.fusion.enabled:
        kept = kept_states_folder(config, folder)
        fit_bundle_fusion(bundle, data, config.fusion.rule, config.validation.batch_size, log, kept)
    bundle.save(config.run.output)
    if not config.run.keep_checkpoints:
        remove_checkpoints(folder)
    seconds = time.perf_counter() - started
    log(f"bundle written to {config.run.output} in {seconds:.1f} s ({info['train_seconds']} s of training)")
    return bundle


def _silent(message: str) -> None:
    """The log of a process that trains alongside the launching one, which logs for both."""


def fit_bundle_fusion(
    bundle: Bundle,
    data: TrainingData,
    rule: FusionRule,
    batch_size: int,
    log: Callable[[str], None],
    kept: Path | None,
) -> None:
    """Make the bundle hybrid (its dense score fused with BM25, CRM and knn over the training contexts, the
    weights fitted on the valid contexts); the fitted weights and the valid MRRs go to its info. The contexts
    are encoded from the frozen layers' output kept in `kept`, as training read it (None, or no frozen layers:
    by the whole context encoder)."""

    def encode(samples: Sequence[Sample]) -> np.ndarray:
        return SampleCollator(bundle.context_encoder, samples, kept).encode(batch_size)

    mrrs = make_hybrid(bundle, data.train, data.valid, rule, batch_size, encode)
    assert bundle.fusion is not None
    bundle.info["fusion"] = {
        **bundle.fusion.to_json(),
        "valid_mrr": mrrs["fused"],
        "valid_mrr_dense": mrrs["dense"],
        "valid_mrr_alone": {name: mrr for name, mrr in mrrs.items() if name != "fused"},
    }
    alone = ", ".join(f"{name} {mrr:.4f}" for name, mrr in mrrs.items() if name != "fused")
    log(f"fusion fitted on valid ({bundle.fusion.describe()}): valid MRR {mrrs['fused']:.4f}; alone: {alone}")


def _stop_summary(metrics: dict[str, float]) -> str:
    """How far a stage trained, for the log: its optimizer steps and complete epochs (Lightning's progress
    bar numbers epochs from 0)."""
    epochs = int(metrics["epochs"])
    return f"stopped after {int(metrics['steps']):,} steps and {epochs} full epoch{'' if epochs == 1 else 's'}"


def train_stages(
    config: TrainConfig,
    encoders: Encoders,
    data: TrainingData,
    folder: Path,
    log: Callable[[str], None],
    started: float | None = None,
) -> dict[str, dict[str, float]]:
    """Stage 1 (both encoders, negative sampling) then stage 2 (frozen quote vectors, all train quotes) on
    the same encoder objects; returns each stage's best validation metrics. The minutes logged with each
    validation count from `started` (time.perf_counter(); None: each stage's start)."""
    metrics = {}
    seed, valid_batch = config.run.seed, config.validation.batch_size
    kept = kept_states_folder(config, folder)
    if config.joint.enabled:
        log("stage 1: training both encoders with negative sampling")
        negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed)
        module = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
        batches = QuoteDataModule(
            data, encoders.context, config.joint.batch_size, valid_batch, seed, config.negatives.in_batch, kept
        )
        metrics["joint"] = run_stage(module, batches, config.joint, config.run, folder / JOINT_FOLDER, "joint", started)
        log(f"stage 1: {_stop_summary(metrics['joint'])}; best validation MRR {metrics['joint']['val_mrr']:.4f}")
    if config.retrain.enabled:
        log("stage 2: training the context encoder over all train quotes, quote encoder frozen")
        encoders.quote.requires_grad_(False)
        stage_one = {key: value.clone() for key, value in encoders.context.state_dict().items()}
        quote_vectors = encode_quote_set(encoders.quote, data.records).vectors
        module = RetrainModule(encoders.context, quote_vectors, data.train_quote_ids, config.retrain)
        batches = QuoteDataModule(data, encoders.context, config.retrain.batch_size, valid_batch, seed, False, kept)
        metrics["retrain"] = run_stage(
            module, batches, config.retrain, config.run, folder / RETRAIN_FOLDER, "retrain", started
        )
        log(f"stage 2: {_stop_summary(metrics['retrain'])}; best validation MRR {metrics['retrain']['val_mrr']:.4f}")
        # Stage 1 validated against the same quote vectors, so its MRR is the starting point stage 2 must beat.
        if "joint" in metrics and metrics["retrain"]["val_mrr"] < metrics["joint"]["val_mrr"]:
            encoders.context.load_state_dict(stage_one)
            metrics["retrain"]["kept_stage_one"] = True
            log("stage 2 did not beat stage 1 on validation MRR: keeping the stage-1 context encoder")
    return metrics
