"""Every training setting as a typed dataclass with one default, read from YAML plus dotted overrides by the
loader every command shares (quoter.settings): a bad key or value is one line that names it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, get_args

from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.errors import QuoterError
from quoter.fusion import FusionRule
from quoter.languages import Language
from quoter.sememes.sources import LexiconConfig
from quoter.settings import at_least, load_settings, setting
from quoter.settings import config_to_dict as config_to_dict  # the bundle's record of its settings


class LoggerKind(str, Enum):
    """auto: wandb (offline unless logged in) when installed, else CSV; or one of them; none: no logger."""

    AUTO = "auto"
    WANDB = "wandb"
    CSV = "csv"
    NONE = "none"


@dataclass(frozen=True)
class DataConfig:
    """path: QuoteR TSV/JSONL file; splits: splits JSON (default: the sidecar file); part: official part name;
    language: None guesses it from the data; glosses: a quote list (quote, source, gloss) for the quotes."""

    path: str | None = setting(None, "QuoteR TSV or JSONL file")
    splits: str | None = setting(
        None,
        'Splits JSON {"train": [0, a], "valid": [a, b], "test": [b, n]} of half-open line ranges. Default: '
        "NAME.splits.json or splits.json beside the data file, if there is one",
    )
    part: str | None = setting(
        None, "Official QuoteR part whose fixed splits apply: english, modern_chinese, ancient_chinese"
    )
    language: Language | None = None
    glosses: str | None = None


@dataclass(frozen=True)
class ModelConfig:
    """name: pretrained model of both encoders (Hugging Face name, folder or offline:*); None: the
    language's default. Lengths count special tokens. pooling: 'mask' is the paper's (context at the [MASK]
    in the gap, quote at [CLS]), 'cls' the BERT-Sim context encoder, 'mean' mean pooling with the model's
    prompts and cosine, 'native' whatever the model was trained with; gap: what stands in the gap of a
    mean-pooled context (None: the model's choice); scale: the factor on cosine scores with normalised
    pooling, a softmax temperature of 1/scale (None: the model's); gloss: quotes are read with their glosses
    and sources (data.glosses);
    freeze_word_embeddings keeps the token embedding tables fixed (most of a multilingual model's weights);
    freeze_layers keeps all embeddings and the lowest N transformer layers of both encoders fixed, running as
    in inference (no dropout); cache_frozen_layers then computes their output for each context once and
    trains only the layers above (the same weights, several times the contexts per second); dropout: the
    probability of every dropout of both models (None: the model's own)."""

    name: str | None = None
    context_max_length: int = ContextEncoderConfig.max_length
    quote_max_length: int = QuoteEncoderConfig.max_length
    pooling: PoolingChoice = PoolingChoice.MASK
    gap: GapMarker | None = None
    scale: float | None = None
    gloss: bool = False
    freeze_word_embeddings: bool = False
    freeze_layers: int = 0
    cache_frozen_layers: bool = True
    dropout: float | None = None

    def __post_init__(self) -> None:
        at_least("context_max_length", self.context_max_length, 4)
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise QuoterError(f"dropout: must be in [0, 1), got {self.dropout}")
        at_least("freeze_layers", self.freeze_layers, 0)
        at_least("quote_max_length", self.quote_max_length, 3)
        if self.scale is not None and self.scale <= 0:
            raise QuoterError(f"scale: must be positive, got {self.scale}")


@dataclass(frozen=True)
class SememeConfig(LexiconConfig):
    """The lexicon (see LexiconConfig), except that by default there is none: source None means no sememes
    (the -Sememe ablation, like alpha 0); alpha: weight of the sememe embeddings (Eq. 6)."""

    source: str | None = None
    alpha: float = QuoteEncoderConfig.alpha

    def __post_init__(self) -> None:
        if self.alpha < 0:
            raise QuoterError(f"alpha: must not be negative, got {self.alpha}")


@dataclass(frozen=True)
class NegativeConfig:
    """Stage 1's negatives per context, all from quotes of the train split: `count` in all (the paper's N,
    19); with in_batch, the other contexts' gold quotes come first, up to count - hard of them (batches
    then never hold one quote twice); then `hard` of the `hard_pool` quotes nearest the gold quote by the
    current quote vectors (mined again every epoch), passing over the `hard_skip` nearest (near-synonyms that
    may fit the gap as well as the gold quote); random quotes fill the rest. With cache, every other train
    quote joins each context's softmax too, through a cache of their vectors encoded without gradients at the
    start of each epoch: the context encoder sees all train quotes as negatives for one encoding of them per
    epoch, while only the sampled ones carry gradients to the quote encoder."""

    count: int = 19
    in_batch: bool = False
    hard: int = 0
    hard_pool: int = 30
    hard_skip: int = 0
    cache: bool = False

    def __post_init__(self) -> None:
        at_least("count", self.count, 1)
        at_least("hard", self.hard, 0)
        at_least("hard_skip", self.hard_skip, 0)
        at_least("hard_pool", self.hard_pool, max(1, self.hard))
        if self.hard > self.count:
            raise QuoterError(f"hard: at most count ({self.count}) negatives can be hard, got {self.hard}")


@dataclass(frozen=True)
class StageConfig:
    """One training stage: AdamW with a learning rate that declines linearly to 0 after a warmup; early
    stopping after `patience` validations without a better validation MRR; max_steps -1: no step limit;
    quote_lr: stage 1's learning rate of the quote encoder (None: lr, as for the context encoder);
    validate_every: optimizer steps between validations (None: at the end of each epoch)."""

    enabled: bool = True
    epochs: int = 3
    batch_size: int = 16
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.0
    patience: int = 2
    max_steps: int = -1
    quote_lr: float | None = None
    validate_every: int | None = None

    def __post_init__(self) -> None:
        at_least("epochs", self.epochs, 1)
        if self.validate_every is not None:
            at_least("validate_every", self.validate_every, 1)
        at_least("batch_size", self.batch_size, 1)
        at_least("patience", self.patience, 1)
        for name, lr in (("lr", self.lr), ("quote_lr", self.quote_lr)):
            if lr is not None and lr <= 0:
                raise QuoterError(f"{name}: must be positive, got {lr}")
        if not 0 <= self.warmup_fraction < 1:
            raise QuoterError(f"warmup_fraction: must be in [0, 1), got {self.warmup_fraction}")
        if self.max_steps < -1 or self.max_steps == 0:
            raise QuoterError(f"max_steps: must be -1 (no limit) or positive, got {self.max_steps}")


@dataclass(frozen=True)
class FusionConfig:
    """Hybrid ranking: after training, fuse the trained model's scores with BM25 and CRM, the weights fitted
    on the valid split, and save the fusion in the bundle (off: the bundle ranks by the dense score alone,
    as the paper does)."""

    enabled: bool = True
    rule: FusionRule = FusionRule.ZSCORE


@dataclass(frozen=True)
class ValidationConfig:
    """Exact MRR over the full quote set on the valid split; max_samples: evenly spread valid contexts to use
    (None: all), which keeps validation affordable on a CPU."""

    max_samples: int | None = None
    batch_size: int = 64

    def __post_init__(self) -> None:
        if self.max_samples is not None:
            at_least("max_samples", self.max_samples, 1)
        at_least("batch_size", self.batch_size, 1)


@dataclass(frozen=True)
class RunConfig:
    """seed: python, numpy and torch; precision 'auto': bf16-mixed on GPUs (16-mixed on those without bf16),
    32-true on a CPU (bf16-mixed also runs there, fast with AMX); devices 'auto':
    every GPU (DDP when more than one) or the CPU, a number: that many GPUs, or without GPUs that many CPU
    processes (DDP over gloo); num_nodes: machines, each running `devices` processes (DDP; run the command on
    each with NODE_RANK, MASTER_ADDR and MASTER_PORT set); under DDP each process trains on a batch of
    batch_size and stage 1 uses every process's quotes as negatives; checkpoint_every: optimizer steps between
    resumable checkpoints; checkpoints: their folder (None: OUTPUT.checkpoints beside the output); resume: continue
    the run found there; keep_checkpoints: keep them once the bundle is written (else they are deleted then,
    the logs kept: they only serve resuming the run)."""

    output: str | None = setting(None, "Folder to write the bundle to")
    seed: int = 42
    accumulate_grad_batches: int = 1
    precision: str = "auto"
    devices: str = "auto"
    num_nodes: int = 1
    checkpoint_every: int = 200
    checkpoints: str | None = None
    resume: bool = True
    keep_checkpoints: bool = False
    logger: LoggerKind = LoggerKind.AUTO
    progress_bar: bool = True

    def __post_init__(self) -> None:
        at_least("accumulate_grad_batches", self.accumulate_grad_batches, 1)
        at_least("num_nodes", self.num_nodes, 1)
        at_least("checkpoint_every", self.checkpoint_every, 1)
        # Checked here, before any model loads, rather than by Lightning once the run has begun.
        if self.precision != "auto" and self.precision not in _lightning_precisions():
            allowed = ", ".join(("auto", *_lightning_precisions()))
            raise QuoterError(f"precision: expected one of {allowed}, got {self.precision!r}")
        if self.devices != "auto" and not (self.devices.isdecimal() and int(self.devices) >= 1):
            raise QuoterError(f"devices: expected 'auto' or a number of at least 1, got {self.devices!r}")


def _lightning_precisions() -> tuple[str, ...]:
    """The precisions Lightning's Trainer takes, as its own type lists them (its numbers as strings)."""
    # Imported only now: Lightning brings torch, seconds to import, for a precision other than auto alone.
    from lightning_fabric.plugins.precision.precision import _PRECISION_INPUT

    values = (value for literal in get_args(_PRECISION_INPUT) for value in get_args(literal))
    return tuple(dict.fromkeys(map(str, values)))


@dataclass(frozen=True)
class TrainConfig:
    """All settings of one training run. Ablations are settings: -Sememe (sememes.source None or alpha 0),
    -ReTrain (retrain.enabled false), -SimTrain (joint.enabled false), BERT-Sim (model.pooling cls,
    joint.enabled false)."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    sememes: SememeConfig = field(default_factory=SememeConfig)
    negatives: NegativeConfig = field(default_factory=NegativeConfig)
    joint: StageConfig = field(default_factory=StageConfig)
    retrain: StageConfig = field(default_factory=StageConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        if not (self.joint.enabled or self.retrain.enabled):
            raise QuoterError("joint.enabled, retrain.enabled: at least one training stage must be enabled")


def load_config(
    path: str | Path | None, overrides: dict[str, str] | None = None, values: dict[str, Any] | None = None
) -> TrainConfig:
    """The training settings of a YAML config (None: all defaults) with dotted overrides and option values
    (quoter.settings.read_settings)."""
    return load_settings(TrainConfig, path, overrides, values)
