"""`quoter bundle ...`: look after bundle folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

bundle_app = typer.Typer(help="Look after bundle folders.", no_args_is_help=True)


@bundle_app.command("upgrade")
def upgrade_command(
    old: Annotated[Path, typer.Argument(help="A version 1 bundle folder.")],
    new: Annotated[Path, typer.Argument(help="Where to write the self-contained bundle.")],
    lexicon: Annotated[
        Optional[str],
        typer.Option(
            help="The sememe lexicon it was trained with (word-sememe file or openhownet), when the path it "
            "recorded does not lead to it from here."
        ),
    ] = None,
) -> None:
    """Convert a version 1 bundle, which reads its sememe lexicon from outside its folder, into one that
    carries everything it needs."""
    from quoter.bundle_upgrade import upgrade_bundle

    upgrade_bundle(old, new, lexicon)
    typer.echo(f"{new}: the bundle of {old}, self-contained", err=True)
