"""`quoter data usage`: real usage examples of the built-in bank quotes, mined from a corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.atomic_files import check_not_an_input, check_output_file, write_text_atomic
from quoter.datasets.mining.usage import UsageConfig, mine_usage
from quoter.datasets.mining.usage_file import render_usage_file
from quoter.datasets.mining.usage_selection import choose_examples, distinct_examples, render_rule_table, rule_table
from quoter.languages import Language
from quoter.quote_bank import bank_path


def usage_command(
    language: Annotated[Language, typer.Option("--lang", help="Language of the bank and the corpus.")],
    corpus: Annotated[
        list[Path],
        typer.Option("--corpus", help="Corpus file, or folder searched for .txt files (repeat for several)."),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="Usage file to write: left, quote, right, file, line, rule, part (tab-separated)."),
    ],
    examples: Annotated[
        Optional[Path],
        typer.Option(
            "--examples",
            help="Idiom dictionary JSONL ({\"idiom\", \"example\"}; '～' marks the idiom, '★' starts the attribution).",
        ),
    ] = None,
    sources: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--sources",
            help="TSV 'file<TAB>source' marking corpus files as works or authors: a quote whose source names one "
            "of them is not counted in that file (repeat for several).",
        ),
    ] = None,
    traditional_to_simplified: Annotated[
        bool, typer.Option("--t2s", help="Also search the Chinese text converted to simplified Chinese (OpenCC t2s).")
    ] = False,
    bank: Annotated[
        Optional[Path], typer.Option("--bank", help="Quote bank TSV. Default: the built-in bank of the language.")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr when it is a terminal.")] = True,
) -> None:
    """Find where each bank quote was used in the corpus and write up to 12 real usage examples per quote;
    the file column is relative to the working directory."""
    bank_file = bank or bank_path(language)
    check_output_file(out, "--out")
    check_not_an_input(out, "--out", {"--bank": bank_file, "--examples": examples})
    config = UsageConfig.for_language(
        language,
        bank_file=bank_file,
        corpus_paths=tuple(corpus),
        examples_file=examples,
        sources_files=tuple(sources or ()),
        traditional_to_simplified=traditional_to_simplified,
        progress=progress,
    )
    mined = mine_usage(config)
    found = distinct_examples(mined.examples)
    written = choose_examples(found, config.max_examples)
    write_text_atomic(out, render_usage_file(written, mined.quotes))
    typer.echo(
        render_rule_table(rule_table(found, mined.rules, config.max_examples), len(mined.quotes), config.max_examples)
    )
    typer.echo(
        f"{len(written):,} examples of {len({e.quote_id for e in written}):,} of the {len(mined.quotes):,} quotes "
        f"written to {out} ({len(written) + 1:,} lines with the header), from {len(found):,} distinct contexts; "
        f"corpus {mined.corpus_bytes / 1e6:,.1f} MB, {mined.seconds:,.1f} s"
    )
