"""Command-line options that several subcommands share, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.serving.runtime_config import MAX_MRR_LOSS, ContextRuntime

SplitsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--splits",
        help='Splits JSON {"train": [0, a], "valid": [a, b], "test": [b, n]} of half-open line ranges. '
        "Default: NAME.splits.json or splits.json beside the data file, if there is one.",
    ),
]
PartOption = Annotated[
    Optional[str],
    typer.Option(
        "--part", help="Official QuoteR part whose fixed splits apply: english, modern_chinese, ancient_chinese."
    ),
]
RuntimeOption = Annotated[
    ContextRuntime,
    typer.Option(
        "--runtime",
        help=f"What runs the context encoder; auto: the fastest whose MRR, measured when it is first exported, is "
        f"at most {MAX_MRR_LOSS} below float32 torch's.",
    ),
]
