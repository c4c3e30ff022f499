"""Every training setting as a typed dataclass with one default, read from YAML plus dotted overrides.

A bad key or value is a one-line QuoterError that names the key (`joint.epochs: expected an integer, got
'x'`), so the command line never shows a traceback for a typo in a config file."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.errors import QuoterError
from quoter.fusion import FusionRule
from quoter.languages import Language
from quoter.sememes.sources import LexiconConfig


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

    path: str | None = None
    splits: str | None = None
    part: str | None = None
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
    freeze_word_embeddings keeps the token embedding tables fixed (most of a multilingual model's weights)."""

    name: str | None = None
    context_max_length: int = ContextEncoderConfig.max_length
    quote_max_length: int = QuoteEncoderConfig.max_length
    pooling: PoolingChoice = PoolingChoice.MASK
    gap: GapMarker | None = None
    scale: float | None = None
    gloss: bool = False
    freeze_word_embeddings: bool = False

    def __post_init__(self) -> None:
        _at_least("context_max_length", self.context_max_length, 4)
        _at_least("quote_max_length", self.quote_max_length, 3)
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
    current quote vectors (mined again every epoch); random quotes fill the rest."""

    count: int = 19
    in_batch: bool = False
    hard: int = 0
    hard_pool: int = 30

    def __post_init__(self) -> None:
        _at_least("count", self.count, 1)
        _at_least("hard", self.hard, 0)
        _at_least("hard_pool", self.hard_pool, max(1, self.hard))
        if self.hard > self.count:
            raise QuoterError(f"hard: at most count ({self.count}) negatives can be hard, got {self.hard}")


@dataclass(frozen=True)
class StageConfig:
    """One training stage: AdamW with a learning rate that declines linearly to 0 after a warmup; early
    stopping after `patience` validations without a better validation MRR; max_steps -1: no step limit."""

    enabled: bool = True
    epochs: int = 3
    batch_size: int = 16
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.0
    patience: int = 2
    max_steps: int = -1

    def __post_init__(self) -> None:
        _at_least("epochs", self.epochs, 1)
        _at_least("batch_size", self.batch_size, 1)
        _at_least("patience", self.patience, 1)
        if self.lr <= 0:
            raise QuoterError(f"lr: must be positive, got {self.lr}")
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
            _at_least("max_samples", self.max_samples, 1)
        _at_least("batch_size", self.batch_size, 1)


@dataclass(frozen=True)
class RunConfig:
    """seed: python, numpy and torch; precision 'auto': bf16-mixed on GPUs, 32-true on CPU; devices 'auto':
    every GPU (DDP when more than one) or the CPU; checkpoint_every: optimizer steps between resumable
    checkpoints; checkpoints: their folder (None: OUTPUT.checkpoints beside the output); resume: continue
    the run found there; keep_checkpoints: keep them once the bundle is written (else they are deleted then,
    the logs kept: they only serve resuming the run)."""

    output: str | None = None
    seed: int = 42
    accumulate_grad_batches: int = 1
    precision: str = "auto"
    devices: str = "auto"
    checkpoint_every: int = 200
    checkpoints: str | None = None
    resume: bool = True
    keep_checkpoints: bool = False
    logger: LoggerKind = LoggerKind.AUTO
    progress_bar: bool = True

    def __post_init__(self) -> None:
        _at_least("accumulate_grad_batches", self.accumulate_grad_batches, 1)
        _at_least("checkpoint_every", self.checkpoint_every, 1)


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


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise QuoterError(f"{name}: must be at least {low}, got {value}")


# A config file's key that names the config file it builds on.
BASE_KEY = "base"


def load_config(
    path: str | Path | None, overrides: dict[str, str] | None = None, values: dict[str, Any] | None = None
) -> TrainConfig:
    """Read a YAML config (None: all defaults) over the configs it builds on (`base: FILE`, relative to it),
    apply dotted overrides {"joint.epochs": "2"} whose values are parsed as YAML scalars, then dotted `values`
    taken as they are (paths from command-line options)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_config_file(Path(path), ())
    for key, text in (overrides or {}).items():
        _set_dotted(data, key, _parse_scalar(key, text))
    for key, value in (values or {}).items():
        _set_dotted(data, key, value)
    return build(TrainConfig, data, "")


def parse_assignments(assignments: list[str]) -> dict[str, str]:
    """`key=value` strings from the command line as a dict; a string without '=' is an error."""
    parsed = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise QuoterError(f"expected key=value (e.g. joint.epochs=2), got '{assignment}'")
        parsed[key.strip()] = value
    return parsed


def _read_config_file(path: Path, including: tuple[Path, ...]) -> dict[str, Any]:
    """A config file's settings over those of its `base` (a config file named relative to it), if it has
    one; `including` are the files that led here, so that a loop of bases is an error, not a hang."""
    data = _read_yaml(path)
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str) or not base.strip():
        raise QuoterError(f"{path}: {BASE_KEY}: expected the path of another config file, got {base!r}")
    if path.resolve() in including:
        raise QuoterError(f"{path}: {BASE_KEY}: the config files name each other as their base")
    return _merged(_read_config_file(path.parent / base, (*including, path.resolve())), data)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s settings in place of its own, section by section."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = _merged(merged[key], value)
        merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QuoterError(f"{path}: config file not found") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise QuoterError(f"{path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise QuoterError(f"{path}: a config file must be a mapping of sections")
    return data


def _parse_scalar(key: str, text: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise QuoterError(f"{key}: cannot read the value '{text}'") from None


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *sections, last = key.split(".")
    target = data
    for section in sections:
        child = target.setdefault(section, {})
        if not isinstance(child, dict):
            raise QuoterError(f"{key}: '{section}' is a setting, not a section")
        target = child
    target[last] = value


def build(cls: type, data: Any, prefix: str) -> Any:
    """An instance of dataclass `cls` from a mapping, each value checked against the field's type."""
    if not isinstance(data, dict):
        raise QuoterError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [key for key in data if key not in names]
    if unknown:
        raise QuoterError(f"{prefix}{unknown[0]}: unknown setting; known in this section: {', '.join(names)}")
    values = {key: _convert(hints[key], value, prefix + key) for key, value in data.items()}
    try:
        return cls(**values)
    except QuoterError as error:
        raise QuoterError(f"{prefix}{error}") from None


def _convert(hint: Any, value: Any, key: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return build(hint, value if value is not None else {}, key + ".")
    options = (
        typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else ()
    )
    if options:
        if value is None and type(None) in options:
            return None
        (hint,) = [option for option in options if option is not type(None)]
    if isinstance(hint, type) and issubclass(hint, Enum):
        allowed = [member.value for member in hint]
        if value not in allowed:
            raise QuoterError(f"{key}: expected one of {', '.join(map(str, allowed))}, got {value!r}")
        return hint(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise QuoterError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise QuoterError(f"{key}: expected an integer, got {value!r}")
        return value
    if hint is float:
        # YAML 1.1 reads 5e-5 (no dot) as a string, so numeric strings are numbers here.
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except (TypeError, ValueError):
            raise QuoterError(f"{key}: expected a number, got {value!r}") from None
    if isinstance(value, (dict, list)) or value is None:
        raise QuoterError(f"{key}: expected a string, got {value!r}")
    return str(value)


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as plain JSON-able values (enums by value), for the bundle's info and the run folder."""
    result = {}
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if dataclasses.is_dataclass(value):
            value = config_to_dict(value)
        elif isinstance(value, Enum):
            value = value.value
        result[item.name] = value
    return result
