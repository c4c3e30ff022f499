"""`quoter data ...`: look at datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quoter.cli.data_build_command import build_command
from quoter.cli.data_usage_command import usage_command
from quoter.cli.options import PartOption, SplitsOption
from quoter.datasets import dataset_stats, load_dataset, render_stats
from quoter.errors import QuoterError

data_app = typer.Typer(help="Inspect QuoteR datasets.", no_args_is_help=True)


@data_app.command("stats")
def stats_command(
    files: Annotated[list[Path], typer.Argument(help="QuoteR TSV (left<TAB>quote<TAB>right) or JSONL files.")],
    splits: SplitsOption = None,
    part: PartOption = None,
) -> None:
    """Print pairs and quotes per split, zero-shot quotes, and quotes per frequency range (Tables 1 and 4)."""
    if splits is not None and len(files) > 1:
        raise QuoterError("--splits belongs to one data file; give one file, or put a splits.json beside each")
    for file in files:
        dataset = load_dataset(file, splits=splits, part=part)
        typer.echo(render_stats(dataset_stats(dataset)))
        if dataset.splits_source is not None:
            typer.echo(f"\nsplits from {dataset.splits_source}")
        typer.echo("")


data_app.command("build")(build_command)
data_app.command("usage")(usage_command)
