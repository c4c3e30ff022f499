"""How an encoder is saved, the same for both: one folder holding the transformers model and tokenizer in
`model/` (safetensors), the encoder's settings as JSON (its config's fields, as saved_config writes them, and
what else it keeps) with a format name and version, and any files of its own; written atomically, and loaded
through the same checked path as a pretrained model (weights the encoder needs may not be missing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quoter.atomic_files import write_folder_atomic
from quoter.encoders.model_sources import load_pretrained
from quoter.errors import InputError
from quoter.json_files import read_json_file

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

MODEL_FOLDER = "model"
# What every saved encoder's settings hold beside its own.
FORMAT_KEYS = ("format", "version")


def save_encoder(
    folder: Path,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    settings_file: str,
    settings: dict[str, Any],
    write_more: Callable[[Path], None] | None = None,
) -> None:
    """Write model, tokenizer, `settings` (with their format and version in it) and whatever `write_more`
    adds into `folder`, which is replaced only once everything is written."""

    def build(target: Path) -> None:
        model.save_pretrained(target / MODEL_FOLDER)
        tokenizer.save_pretrained(target / MODEL_FOLDER)
        if write_more is not None:
            write_more(target)
        (target / settings_file).write_text(json.dumps(settings, ensure_ascii=False, indent=1), encoding="utf-8")

    write_folder_atomic(Path(folder), build)


def read_encoder_settings(
    folder: Path, settings_file: str, kind: str, saved_format: str, version: int, required: tuple[str, ...]
) -> dict[str, Any]:
    """The settings of an encoder saved by `save_encoder`; anything else is a one-line InputError naming
    the file (`kind` says what was expected, e.g. 'quote encoder')."""
    path = Path(folder) / settings_file
    settings = read_json_file(path, f"not a saved {kind} (settings file missing)")
    if not isinstance(settings, dict) or settings.get("format") != saved_format:
        raise InputError(f"not a saved {kind} (format is not '{saved_format}')", path=path)
    if settings.get("version") != version:
        raise InputError(f"saved {kind} version {settings.get('version')} is not supported", path=path)
    for key in required:
        if key not in settings:
            raise InputError(f"missing setting '{key}'", path=path)
    return settings


def load_encoder_model(folder: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """The model and fast tokenizer saved in `folder`, checked as every loaded model is."""
    return load_pretrained(str(Path(folder) / MODEL_FOLDER))
