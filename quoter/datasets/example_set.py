"""The built-in example set: hand-written contexts for 27 public-domain English proverbs, with its splits.
It is the data `quoter evaluate` uses when none is given, and part of the English check set of the ONNX runtimes."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE_DATA = Path(str(resources.files("quoter") / "examples" / "proverbs.tsv"))
