"""`quoter train`: train a model from a YAML config and write a bundle. `python train.py` is the same command."""

from __future__ import annotations

import typer

from quoter.cli.options import CommandSettings
from quoter.errors import QuoterError
from quoter.training.config import TrainConfig

SETTINGS = CommandSettings(
    TrainConfig,
    "joint.epochs=2",
    "YAML config (see configs/).",
    {"data.path": "--data", "data.splits": "--splits", "data.part": "--part", "run.output": "--output"},
)


@SETTINGS.command
def train_command(*, settings: TrainConfig) -> None:
    """Train the two-stage QuoteR model (both encoders with negatives, then the context encoder over all
    training quotes) and write a bundle for `quoter evaluate --method bundle`."""
    if settings.data.splits is not None and settings.data.part is not None:
        raise QuoterError("give either --splits or --part, not both")
    # Imported here: torch and Lightning take seconds to import, which a config error should not wait for.
    from quoter.training.pipeline import train

    train(settings, log=lambda message: typer.echo(message, err=True))
