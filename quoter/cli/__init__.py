"""The `quoter` command. Each group of subcommands lives in its own module and is registered here."""

from __future__ import annotations

import sys

import typer

from quoter.cli.bundle_commands import bundle_app
from quoter.cli.data_commands import data_app
from quoter.cli.encode_command import encode_command
from quoter.cli.evaluate_command import evaluate_command
from quoter.cli.library_output import quiet_libraries
from quoter.cli.sememes_commands import sememes_app
from quoter.cli.serve_commands import batch_command, serve_command
from quoter.cli.train_command import train_command
from quoter.errors import QuoterError

app = typer.Typer(
    name="quoter",
    help="Quote recommendation for writing: rank every known quote by how well it fits a gap.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)
app.add_typer(data_app, name="data")
app.command("evaluate")(evaluate_command)
app.add_typer(sememes_app, name="sememes")
app.command("train")(train_command)
app.command("serve")(serve_command)
app.command("batch")(batch_command)
app.command("encode")(encode_command)
app.add_typer(bundle_app, name="bundle")


def main() -> None:
    """Run the command line; errors the user can fix are one line on stderr and exit status 2."""
    quiet_libraries()
    try:
        app()
    except QuoterError as error:
        typer.echo(f"error: {error}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
