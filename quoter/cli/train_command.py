"""`quoter train`: train a model from a YAML config and write a bundle. `python train.py` is the same command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.cli.options import PartOption, SplitsOption
from quoter.errors import QuoterError
from quoter.training.config import load_config, parse_assignments


def run_training(
    config: Path | None,
    data: Path | None,
    splits: Path | None,
    part: str | None,
    output: Path | None,
    overrides: dict[str, str],
) -> None:
    """Load the config with the command line's options and overrides, train, and write the bundle."""
    options = {"data.path": data, "data.splits": splits, "data.part": part, "run.output": output}
    values = {key: str(value) for key, value in options.items() if value is not None}
    settings = load_config(config, overrides, values)
    # Imported here: torch and Lightning take seconds to import, which a config error should not wait for.
    from quoter.training.pipeline import train

    train(settings, log=lambda message: typer.echo(message, err=True))


def train_command(
    config: Annotated[
        Optional[Path], typer.Option(help="YAML config (see configs/). Default: every setting's default.")
    ] = None,
    data: Annotated[Optional[Path], typer.Option(help="QuoteR TSV or JSONL file (data.path).")] = None,
    splits: SplitsOption = None,
    part: PartOption = None,
    output: Annotated[Optional[Path], typer.Option(help="Folder to write the bundle to (run.output).")] = None,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="Override a setting: --set joint.epochs=2 (repeatable; values are YAML)."),
    ] = None,
) -> None:
    """Train the two-stage QuoteR model (both encoders with negatives, then the context encoder over all
    training quotes) and write a bundle for `quoter evaluate --method bundle`."""
    if splits is not None and part is not None:
        raise QuoterError("give either --splits or --part, not both")
    run_training(config, data, splits, part, output, parse_assignments(set_ or []))
