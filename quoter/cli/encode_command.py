"""`quoter encode`: encode a quote list with a bundle's quote encoder into a quote set file, which `quoter
serve`, `quoter batch` and `quoter evaluate` rank with that bundle (`--quotes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.atomic_files import check_output_file
from quoter.errors import QuoterError

QUOTE_LIST_HELP = (
    'Quote list: TSV quote<TAB>source[<TAB>gloss] (header line optional), or JSON lines {"quote", "source", "gloss"} '
    "(.jsonl)."
)


def encode_command(
    bundle: Annotated[Path, typer.Option(help="Bundle folder whose quote encoder makes the vectors.")],
    out: Annotated[Path, typer.Option(help="The quote set file to write (JSON lines).")],
    quotes: Annotated[Optional[Path], typer.Option(help=QUOTE_LIST_HELP)] = None,
    data: Annotated[
        Optional[Path],
        typer.Option(help="Instead of --quotes: the distinct quotes of a QuoteR TSV or JSONL data file."),
    ] = None,
    glosses: Annotated[
        Optional[Path],
        typer.Option(help="With --data: a quote list giving the data file's quotes their sources and glosses."),
    ] = None,
) -> None:
    """Encode quotes (with their sources and glosses) into a quote set: stable ids, vectors, and which quote
    encoder made them. Quotes the bundle already holds keep its vectors."""
    if (quotes is None) == (data is None):
        raise QuoterError("give the quotes to encode as --quotes LIST or --data FILE (one of them)")
    if glosses is not None and data is None:
        raise QuoterError("--glosses gives a data file's quotes their glosses; a quote list carries its own")
    check_output_file(out, "--out")
    from quoter.datasets import load_dataset
    from quoter.quote_list import read_quote_list

    records = read_quote_list(quotes) if quotes is not None else load_dataset(data, glosses=glosses).quote_records()
    # Imported here: torch and transformers take seconds to import, which a bad input should not wait for.
    from quoter.bundle import Bundle
    from quoter.quote_set import encode_quote_set, write_quote_set

    loaded = Bundle.load(bundle)
    encoded = encode_quote_set(loaded.quote_encoder, records, loaded.quote_set())
    write_quote_set(out, encoded)
    typer.echo(f"{out}: {len(records):,} quotes encoded by the quote encoder of {bundle}", err=True)
