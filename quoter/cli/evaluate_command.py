"""`quoter evaluate`: rank every context of a split against the whole quote set and report the metrics."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.atomic_files import check_not_an_input, check_output_file, write_json_atomic
from quoter.cli.options import CommandSettings, PartOption, SplitsOption
from quoter.datasets import load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.encoders.ranker import EncoderRanker
from quoter.evaluation import evaluate, render_report
from quoter.evaluation.candidates import read_candidates
from quoter.evaluation.plot import check_plot_path, write_plot
from quoter.evaluation.settings import EvaluateConfig
from quoter.fusion import HybridRanker
from quoter.languages import choose_language
from quoter.methods import build_ranker

SETTINGS = CommandSettings(
    EvaluateConfig,
    "crm_aggregate=sum",
    "YAML settings of the evaluation.",
    {
        "method": None,
        "split": None,
        "left_only": None,
        "lang": None,
        "crm_aggregate": None,
        "model": None,
        "pooling": "--context-pooling",
        "gap": None,
        "gloss": "--gloss/--no-gloss",
        "fusion": None,
        "dense_only": None,
        "runtime": None,
        "bundle": None,
        "quotes": None,
        "batch_size": None,
    },
)


@SETTINGS.command
def evaluate_command(
    data: Annotated[
        Optional[Path],
        typer.Option(help="QuoteR TSV or JSONL file. Default: the small built-in example set of English proverbs."),
    ] = None,
    splits: SplitsOption = None,
    part: PartOption = None,
    glosses: Annotated[
        Optional[Path],
        typer.Option(help="Quote list quote<TAB>source<TAB>gloss giving the data file's quotes their glosses."),
    ] = None,
    candidates: Annotated[
        Optional[Path],
        typer.Option(
            help='Multiple choice as well: JSON lines {"line": N, "candidates": [quote, ...]} (N: 0-based line of '
            "the data file); reports how often the gold quote beats the other candidates."
        ),
    ] = None,
    out: Annotated[Optional[Path], typer.Option(help="Write the metrics as JSON to this file.")] = None,
    plot: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE.png",
            help="Draw the gold-rank distribution and MRR by the gold quote's training contexts into this PNG.",
        ),
    ] = None,
    *,
    settings: EvaluateConfig,
) -> None:
    """Evaluate a method with MRR, NDCG@5, Recall@1/10/100 and rank statistics over the full quote set."""
    method = settings.method
    inputs = {"--data": data, "--splits": splits, "--glosses": glosses, "--candidates": candidates}
    if out is not None:
        check_output_file(out, "--out")
        check_not_an_input(out, "--out", inputs)
    if plot is not None:
        check_plot_path(plot)
        check_not_an_input(plot, "--plot", inputs)
    if data is None:
        data = EXAMPLE_DATA
        typer.echo(f"no --data given: using the built-in example set {data}", err=True)
    dataset = load_dataset(data, splits=splits, part=part, glosses=glosses)
    language, reason = choose_language(settings.lang, part, dataset.text_sample())
    typer.echo(
        f"{data}: {len(dataset.samples):,} samples, {len(dataset.quotes):,} quotes; "
        f"splits from {dataset.splits_source}; language {language.value} ({reason})",
        err=True,
    )
    # Read after the line above: candidates may add quotes to the set, for this evaluation only.
    choices = None if candidates is None else read_candidates(candidates, dataset)
    started = time.perf_counter()
    options = dataclasses.replace(settings, lang=language)
    ranker = build_ranker(method, dataset, options)
    dense = ranker.signals["dense"].ranker if isinstance(ranker, HybridRanker) else ranker
    if isinstance(dense, EncoderRanker):
        typer.echo(f"context encoder runtime: {dense.runtime}", err=True)
    if isinstance(ranker, HybridRanker):
        typer.echo(f"fusion ({ranker.fusion.describe()})", err=True)
    built = time.perf_counter()
    report = evaluate(
        ranker,
        dataset,
        settings.split.value,
        method,
        left_only=settings.left_only,
        batch_size=settings.batch_size,
        progress=True,
        candidates=choices,
    )
    finished = time.perf_counter()
    typer.echo(render_report(report))
    typer.echo(
        f"\nbuilt {method} in {built - started:.2f} s; ranked {report.overall['n']:,} contexts "
        f"in {finished - built:.2f} s",
        err=True,
    )
    if out is not None:
        write_json_atomic(out, report.to_json())
        typer.echo(f"metrics written to {out}", err=True)
    if plot is not None:
        write_plot(report, plot)
        typer.echo(f"plot written to {plot}", err=True)
