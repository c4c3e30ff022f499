"""The cache of what a default bundle learns from its usage examples: the quotes' own vectors, the examples'
context vectors and the cross-fitted pull and fusion. Encoding thousands of examples takes a minute or two on
two cores at the first start; later starts read them in a fraction of a second.

One file per language in $QUOTER_CACHE/defaults/ (~/.cache/quoter/defaults/), named by a hash of everything
the learned values depend on: the encoder (weights, settings, tokenizer), how quotes are read, the quotes
with their sources and glosses, the examples, the settings of the fitting and this module's format. A stale
file is never read; a damaged or unreadable one is computed again.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from quoter.atomic_files import write_bytes_atomic
from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.encoders.fingerprint import encoder_digest
from quoter.encoders.model_sources import cache_dir
from quoter.errors import QuoterError
from quoter.fusion import Fusion
from quoter.quote_record import QuoteRecord

CACHE_FOLDER = "defaults"
CACHE_FORMAT = 1  # part of the key: raised when what is learned, or how, changes


@dataclass(frozen=True)
class LearnedUsage:
    """What a default bundle learned from its examples (see default_bundles.learn_usage)."""

    quote_vectors: np.ndarray  # the quotes' own vectors, before the pull
    example_vectors: np.ndarray
    pull: float
    fusion: Fusion
    mrr: float  # cross-fitted, on the examples


def cache_path(
    bundle: Bundle, quotes: Sequence[QuoteRecord], examples: Sequence[Sample], real: Sequence[bool], recipe: str
) -> Path:
    """The cache file of `bundle`'s encoders over `quotes` learning from `examples` (`real`: which are real)
    the way `recipe` describes (the settings of the fitting)."""
    identity = f"{CACHE_FORMAT} {recipe} {bundle.language.value} {bundle.quote_encoder.identity}"
    digest = xxhash.xxh3_128(identity.encode("utf-8"))
    encoder_digest(bundle.context_encoder, digest)
    for record in quotes:
        digest.update(json.dumps(record.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8"))
    for sample, is_real in zip(examples, real, strict=True):
        fields = [sample.left, sample.quote_id, sample.right, is_real]
        digest.update(json.dumps(fields, ensure_ascii=False).encode("utf-8"))
    return cache_dir() / CACHE_FOLDER / f"{bundle.language.value}-{digest.hexdigest()}.npz"


def read_learned(path: Path) -> LearnedUsage | None:
    """The values cached in `path`; None when it is missing or cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            settings = json.loads(str(stored["settings"]))
            return LearnedUsage(
                stored["quote_vectors"],
                stored["example_vectors"],
                float(settings["pull"]),
                Fusion.from_json(settings["fusion"]),
                float(settings["mrr"]),
            )
    except (OSError, ValueError, KeyError, TypeError, QuoterError):  # damaged: learned again
        return None


def write_learned(path: Path, learned: LearnedUsage) -> None:
    """Cache `learned` in `path`, written whole or not at all (OSError when it cannot be written), and delete
    the language's older entries, which nothing reads any more once the bank, examples or model changed."""
    settings = {"pull": learned.pull, "fusion": learned.fusion.to_json(), "mrr": learned.mrr}
    buffer = io.BytesIO()
    np.savez(
        buffer,
        quote_vectors=learned.quote_vectors,
        example_vectors=learned.example_vectors,
        settings=np.array(json.dumps(settings)),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, buffer.getvalue())
    language = path.name.rsplit("-", 1)[0]  # "zh-classical-<hash>.npz" is not a "zh" entry
    for older in path.parent.glob("*.npz"):
        if older != path and older.name.rsplit("-", 1)[0] == language:
            older.unlink(missing_ok=True)
