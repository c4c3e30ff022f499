"""`quoter train`: train a model from a YAML config and write a bundle. `python train.py` is the same command."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from quoter.cli.options import PART_HELP, SPLITS_HELP, CommandSettings
from quoter.errors import QuoterError
from quoter.training.config import TrainConfig

SETTINGS = CommandSettings(TrainConfig, "joint.epochs=2", "YAML config (see configs/).")
ConfigOption, SetOption = SETTINGS.config_option, SETTINGS.set_option


def train_command(
    context: typer.Context,
    config: ConfigOption = None,
    data: Optional[Path] = SETTINGS.option("data.path", "QuoteR TSV or JSONL file", "--data"),
    splits: Optional[Path] = SETTINGS.option("data.splits", SPLITS_HELP, "--splits"),
    part: Optional[str] = SETTINGS.option("data.part", PART_HELP, "--part"),
    output: Optional[Path] = SETTINGS.option("run.output", "Folder to write the bundle to", "--output"),
    set_: SetOption = None,
) -> None:
    """Train the two-stage QuoteR model (both encoders with negatives, then the context encoder over all
    training quotes) and write a bundle for `quoter evaluate --method bundle`."""
    if splits is not None and part is not None:
        raise QuoterError("give either --splits or --part, not both")
    settings = SETTINGS.load(context, train_command, config, set_)
    # Imported here: torch and Lightning take seconds to import, which a config error should not wait for.
    from quoter.training.pipeline import train

    train(settings, log=lambda message: typer.echo(message, err=True))
