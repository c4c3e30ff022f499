"""Split definitions: the official QuoteR parts and sidecar JSON files of half-open line ranges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quoter.datasets.dataset import SPLIT_NAMES
from quoter.errors import InputError

# Fixed line indices of the published QuoteR files; None means "to the end of the file".
OFFICIAL_PARTS: dict[str, dict[str, tuple[int, int | None]]] = {
    "english": {"train": (0, 101171), "valid": (101171, 113942), "test": (113942, None)},
    "modern_chinese": {"train": (0, 32472), "valid": (32472, 36657), "test": (36657, None)},
    "ancient_chinese": {"train": (0, 93031), "valid": (93031, 104784), "test": (104784, None)},
}


def official_splits(part: str, n_samples: int, path: str | Path) -> dict[str, tuple[int, int]]:
    """The splits of an official QuoteR part, checked against the number of samples in the file."""
    if part not in OFFICIAL_PARTS:
        raise InputError(f"unknown QuoteR part '{part}'; known parts: {', '.join(OFFICIAL_PARTS)}")
    ranges = OFFICIAL_PARTS[part]
    test_start = ranges["test"][0]
    if n_samples <= test_start:
        raise InputError(
            f"has {n_samples} samples, but the official '{part}' part needs more than {test_start} "
            "(train, valid, then test lines); is this the right file?",
            path=path,
        )
    return {name: (start, n_samples if end is None else end) for name, (start, end) in ranges.items()}


def read_splits_file(path: str | Path, n_samples: int) -> dict[str, tuple[int, int]]:
    """Read and check a sidecar splits JSON such as {"train": [0, a], "valid": [a, b], "test": [b, n]}."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("splits file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read splits file: {error}", path=path) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error.msg}", path=path, line=error.lineno) from None
    return parse_splits(obj, n_samples, path)


def parse_splits(obj: Any, n_samples: int, path: str | Path | None = None) -> dict[str, tuple[int, int]]:
    """Check a splits object: train, valid and test as [start, end) ranges within the file, not overlapping.

    Extra keys (a seed, a note) are allowed and ignored.
    """
    if not isinstance(obj, dict):
        raise InputError('expected a JSON object such as {"train": [0, a], "valid": [a, b], "test": [b, n]}', path)
    splits: dict[str, tuple[int, int]] = {}
    for name in SPLIT_NAMES:
        if name not in obj:
            raise InputError("missing split", path=path, field=name)
        value = obj[name]
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise InputError(f"expected [start, end] as two integers, got {json.dumps(value)}", path, field=name)
        start, end = value
        if not 0 <= start <= end:
            raise InputError(f"range [{start}, {end}] must have 0 <= start <= end", path, field=name)
        if end > n_samples:
            raise InputError(
                f"range [{start}, {end}] runs past the end of the data ({n_samples} samples)", path, field=name
            )
        splits[name] = (start, end)
    # Empty ranges cannot overlap anything; among the rest, sorted by start, any overlap shows between neighbours.
    ordered = sorted(((n, r) for n, r in splits.items() if r[0] < r[1]), key=lambda item: item[1])
    for (name_a, (_, end_a)), (name_b, (start_b, _)) in zip(ordered, ordered[1:]):
        if start_b < end_a:
            raise InputError(
                f"ranges of '{name_a}' {list(splits[name_a])} and '{name_b}' {list(splits[name_b])} overlap",
                path,
                field=name_b,
            )
    return splits
