"""`quoter data build`: mine a QuoteR dataset from a quote list and a corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.datasets.mining import BuildConfig, build_dataset
from quoter.datasets.mining.config import CONTEXT_UNITS, MAX_CONTEXTS, MIN_OCCURRENCES, per_language
from quoter.languages import Language


def build_command(
    out: Annotated[Path, typer.Option("--out", help="Output folder: data.txt, splits.json and stats.md.")],
    language: Annotated[Language, typer.Option("--lang", help="Language of the quotes and the corpus.")],
    quotes: Annotated[
        Optional[list[Path]],
        typer.Option("--quotes", help="Quote list TSV with the header 'quote<TAB>source' (repeat for several)."),
    ] = None,
    corpus: Annotated[
        Optional[list[Path]],
        typer.Option("--corpus", help="Corpus file, or folder searched for .txt files (repeat for several)."),
    ] = None,
    examples: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--examples",
            help='JSONL of quotes with example sentences ({"idiom" or "quote", "example", "source"}); '
            "'～' in an example marks where the quote stands. Each record's quote joins the quote set.",
        ),
    ] = None,
    sources: Annotated[
        Optional[Path],
        typer.Option(
            "--sources",
            help="TSV 'file<TAB>source' marking corpus files as works or authors: a quote whose source names "
            "one of them is not counted in that file.",
        ),
    ] = None,
    context: Annotated[
        Optional[int],
        typer.Option(
            help=f"Context size on each side: words (en) or characters (zh). Default {per_language(CONTEXT_UNITS)}."
        ),
    ] = None,
    min_occurrences: Annotated[
        Optional[int],
        typer.Option(help=f"Keep quotes with at least this many pairs. Default {per_language(MIN_OCCURRENCES)}."),
    ] = None,
    max_contexts: Annotated[
        Optional[int],
        typer.Option(help=f"Keep at most this many pairs per quote. Default {per_language(MAX_CONTEXTS)}."),
    ] = None,
    zero_shot: Annotated[
        Optional[int],
        typer.Option(
            help="Quotes that appear only in valid and test (fewer for small sets). "
            f"Default {BuildConfig.zero_shot_quotes}."
        ),
    ] = None,
    max_document_frequency: Annotated[
        Optional[float],
        typer.Option(
            help="Drop quotes found in more than this share of the corpus documents. "
            f"Default {BuildConfig.max_document_frequency}."
        ),
    ] = None,
    seed: Annotated[
        Optional[int], typer.Option(help=f"Seed of the sampling and the split. Default {BuildConfig.seed}.")
    ] = None,
    traditional_to_simplified: Annotated[
        bool, typer.Option("--t2s", help="Convert traditional to simplified Chinese (OpenCC) before matching.")
    ] = False,
    keep_gutenberg: Annotated[
        bool, typer.Option("--keep-gutenberg", help="Do not strip Project Gutenberg headers and footers.")
    ] = False,
    stanza: Annotated[
        bool, typer.Option(help="Split quotes into sentences with stanza where its models are installed.")
    ] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr when it is a terminal.")] = True,
) -> None:
    """Find the quotes in the corpus and build a QuoteR dataset with train/valid/test splits (paper section 4)."""
    config = BuildConfig.for_language(
        language,
        quote_files=tuple(quotes or ()),
        corpus_paths=tuple(corpus or ()),
        example_files=tuple(examples or ()),
        sources_file=sources,
        out_dir=out,
        context_units=context,
        min_occurrences=min_occurrences,
        max_contexts=max_contexts,
        zero_shot_quotes=zero_shot,
        max_document_frequency=max_document_frequency,
        seed=seed,
        traditional_to_simplified=traditional_to_simplified,
        strip_gutenberg=not keep_gutenberg,
        use_stanza=stanza,
        progress=progress,
    )
    report = build_dataset(config)
    typer.echo(f"sentence splitter: {report.splitter}")
    typer.echo(
        f"{report.pairs:,} pairs of {report.kept_quotes:,} quotes ({report.zero_shot:,} zero-shot) written to {out}; "
        f"corpus {report.corpus_bytes / 1e6:,.1f} MB at {report.megabytes_per_second:,.2f} MB/s, "
        f"{report.seconds:,.1f} s in all, peak memory {report.peak_memory_mb:,.0f} MB; details in {out / 'stats.md'}"
    )
