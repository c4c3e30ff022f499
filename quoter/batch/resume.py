"""What a `quoter batch` run depends on, recorded beside its partial output when it starts
(OUTPUT.partial.run.json; a Ray run's in its shard folder), so that --resume continues only the very run
that stopped: the same contexts, the same bundle and quote set, search settings, --k and --left-only (and
a Ray run's block size). A partial output of any other run is refused in one line that says what differs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from quoter.errors import InputError

if TYPE_CHECKING:
    from quoter.batch.contexts import BatchContext
    from quoter.serving.recommender import Recommender

RUN_SUFFIX = ".run.json"

# What each recorded item means when it differs, given the recorded and the wanted value.
DIFFERENCES: dict[str, Callable[[Any, Any], str]] = {
    "input": lambda saved, wanted: "it is the output of other contexts (another input file, or a changed one)",
    "bundle": lambda saved, wanted: (
        "it was ranked by another bundle, or with other --runtime, --int8 or --index settings"
    ),
    "quotes": lambda saved, wanted: "the bundle's quote set has changed since (quotes were added or removed)",
    "k": lambda saved, wanted: f"it holds the top {saved} quotes per context, not {wanted} (--k)",
    "left_only": lambda saved, wanted: f"it was ranked {'with' if saved else 'without'} --left-only",
    # Only a Ray run's shards have one (quoter.batch.ray_job).
    "block": lambda saved, wanted: f"its shards hold {saved} contexts each, not {wanted} (engine.block)",
}


def run_record_path(partial: Path) -> Path:
    """Where the record of the run that writes `partial` is kept."""
    return partial.with_name(partial.name + RUN_SUFFIX)


def run_record(recommender: Recommender, contexts: Sequence[BatchContext], k: int, left_only: bool) -> dict[str, Any]:
    """What the output of this run depends on: hashes of the contexts, of the bundle's model and search
    settings and of its live quote set, and the settings of the run."""
    inputs = hashlib.sha256()
    for context in contexts:
        row = [context.line, context.id, context.query.left, context.query.right]
        inputs.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    encoder = recommender.context_encoder.config
    index = recommender.config.index
    model = {
        "language": recommender.language.value,
        "info": recommender.info,
        "context_encoder": [encoder.max_length, encoder.pooling.to_json(), encoder.gap.value],
        "runtime": recommender.runtime.name,
        "index": [index.kind.value, index.nlist, index.nprobe],
    }
    return {
        "input": {"contexts": len(contexts), "sha256": inputs.hexdigest()},
        "bundle": hashlib.sha256(json.dumps(model, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest(),
        "quotes": recommender.quotes.fingerprint(),
        "k": k,
        "left_only": left_only,
    }


def check_resumable(partial: Path, record: dict[str, Any], path: Path | None = None) -> None:
    """Refuse to resume `partial` unless the run that wrote it recorded exactly `record`, in `path` (None:
    beside it, run_record_path)."""
    path = run_record_path(partial) if path is None else path
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable or not JSON
        saved = None
    if not isinstance(saved, dict):
        _refuse(partial, f"there is no readable record of the run that wrote it ({path.name})")
    for key, difference in DIFFERENCES.items():
        if saved.get(key) != record.get(key):
            _refuse(partial, difference(saved.get(key), record.get(key)))


def _refuse(partial: Path, reason: str) -> NoReturn:
    raise InputError(f"cannot resume: {reason}; delete it or run without --resume", path=partial)
