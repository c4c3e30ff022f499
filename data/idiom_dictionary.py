"""Read the idiom dictionary (../shared/data/zh-modern/idioms.jsonl): each idiom with its source (出处) and
explanation (释义). The data scripts beside this file share it; `无` (none) reads as empty."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from quoter.datasets.mining.quote_lists import collapse_whitespace

NONE_MARK = "无"  # what the dictionary writes for a missing source or explanation
CONTROL = re.compile(r"[\t\r\n]")


@dataclass(frozen=True)
class Idiom:
    """One dictionary entry; fields are TSV-safe (no tabs or line breaks) and trimmed."""

    text: str
    source: str
    explanation: str


def clean_field(text: str) -> str:
    """A TSV-safe field: tabs and line breaks become spaces, trimmed; `无` counts as empty."""
    text = CONTROL.sub(" ", text).strip()
    return "" if text == NONE_MARK else text


def read_idioms(path: Path) -> dict[str, Idiom]:
    """Idiom text (white space collapsed) -> entry, in file order; the first record of a text wins."""
    idioms: dict[str, Idiom] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                text = collapse_whitespace(record["idiom"])
                entry = Idiom(text, clean_field(record.get("source", "")), clean_field(record.get("explanation", "")))
                idioms.setdefault(text, entry)
    return idioms
