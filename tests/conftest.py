"""Shared test fixtures: small QuoteR files written into a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def write_quoter_file(
    folder: Path, rows: list[tuple[str, str, str]], splits: dict | None = None, name: str = "data.txt"
) -> Path:
    """Write rows as a QuoteR TSV file, and its splits as NAME.splits.json when given."""
    path = folder / name
    path.write_text("".join(f"{l}\t{q}\t{r}\n" for l, q, r in rows), encoding="utf-8")
    if splits is not None:
        path.with_name(path.stem + ".splits.json").write_text(json.dumps(splits), encoding="utf-8")
    return path


@pytest.fixture
def write_dataset(tmp_path):
    """Write a QuoteR file (and optional splits) into tmp_path; returns its path."""

    def write(rows, splits=None, name="data.txt"):
        return write_quoter_file(tmp_path, rows, splits, name)

    return write
