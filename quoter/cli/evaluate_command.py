"""`quoter evaluate`: rank every context of a split against the whole quote set and report the metrics."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.atomic_files import check_output_file, write_json_atomic
from quoter.baselines.crm import Aggregate
from quoter.cli.options import PartOption, RuntimeOption, SplitsOption
from quoter.datasets import load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.encoders.model_sources import DEFAULT_MODELS, OFFLINE_MODELS, OFFLINE_PREFIX
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.encoders.ranker import EncoderRanker
from quoter.errors import QuoterError
from quoter.evaluation import evaluate, render_report
from quoter.evaluation.candidates import read_candidates
from quoter.evaluation.plot import check_plot_path, write_plot
from quoter.fusion import FusionRule, HybridRanker
from quoter.languages import Language, choose_language
from quoter.methods import METHODS, MethodOptions, build_ranker
from quoter.serving.runtime_config import ContextRuntime

DEFAULT_OPTIONS = MethodOptions()


class Split(str, Enum):
    TEST = "test"
    VALID = "valid"


def evaluate_command(
    method: Annotated[str, typer.Option(help=f"Recommendation method: {', '.join(METHODS)}.")] = "bm25",
    data: Annotated[
        Optional[Path],
        typer.Option(help="QuoteR TSV or JSONL file. Default: the small built-in example set of English proverbs."),
    ] = None,
    splits: SplitsOption = None,
    part: PartOption = None,
    split: Annotated[Split, typer.Option(help="Which split's contexts to rank.")] = Split.TEST,
    left_only: Annotated[
        bool, typer.Option("--left-only", help="Drop the right context (autocomplete; the paper's Appendix B).")
    ] = False,
    lang: Annotated[
        Optional[Language],
        typer.Option(help="Language for lexical methods. Default: the part's language, else guessed from the quotes."),
    ] = None,
    crm_aggregate: Annotated[
        Aggregate, typer.Option(help="crm: how the scores of a quote's training contexts are combined.")
    ] = Aggregate.MAX,
    model: Annotated[
        Optional[str],
        typer.Option(
            help="encoder: Hugging Face model name, local model folder, or an offline name "
            f"({', '.join(OFFLINE_PREFIX + name for name in OFFLINE_MODELS)}). Default per language: "
            + ", ".join(f"{language.value} {name}" for language, name in DEFAULT_MODELS.items())
            + "."
        ),
    ] = None,
    context_pooling: Annotated[
        PoolingChoice,
        typer.Option(
            help="encoder: the model's native pooling (mean and cosine for the offline models), the paper's "
            "(context at the [MASK] in the gap, quote at [CLS]), BERT-Sim's [CLS], or mean pooling."
        ),
    ] = DEFAULT_OPTIONS.pooling,
    gap: Annotated[
        Optional[GapMarker],
        typer.Option(
            help="encoder, mean pooling: what stands in the gap (mask token, '___', nothing). Default: the model's."
        ),
    ] = None,
    glosses: Annotated[
        Optional[Path],
        typer.Option(help="Quote list quote<TAB>source<TAB>gloss giving the data file's quotes their glosses."),
    ] = None,
    gloss: Annotated[
        bool, typer.Option("--gloss/--no-gloss", help="encoder: read each quote with its gloss (see --glosses).")
    ] = DEFAULT_OPTIONS.gloss,
    fusion: Annotated[
        FusionRule,
        typer.Option(
            help="hybrid: how the encoder's, BM25's and CRM's scores are made comparable before their weighted "
            "sum (z-scores, or reciprocal rank fusion); the weights are fitted on the valid split."
        ),
    ] = DEFAULT_OPTIONS.fusion,
    dense_only: Annotated[
        bool, typer.Option("--dense-only", help="bundle: rank by a hybrid bundle's dense score alone, unfused.")
    ] = DEFAULT_OPTIONS.dense_only,
    runtime: RuntimeOption = ContextRuntime.AUTO,
    candidates: Annotated[
        Optional[Path],
        typer.Option(
            help='Multiple choice as well: JSON lines {"line": N, "candidates": [quote, ...]} (N: 0-based line of '
            "the data file); reports how often the gold quote beats the other candidates."
        ),
    ] = None,
    bundle: Annotated[
        Optional[Path], typer.Option(help="bundle: folder of a bundle written by `quoter train`.")
    ] = None,
    quotes: Annotated[
        Optional[Path],
        typer.Option(
            help="bundle: a quote set written by `quoter encode` with the bundle, whose vectors are used for the "
            "quotes it holds. Default: the bundle's own quotes."
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Contexts scored at once.")] = 256,
    out: Annotated[Optional[Path], typer.Option(help="Write the metrics as JSON to this file.")] = None,
    plot: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE.png",
            help="Draw the gold-rank distribution and MRR by the gold quote's training contexts into this PNG.",
        ),
    ] = None,
) -> None:
    """Evaluate a method with MRR, NDCG@5, Recall@1/10/100 and rank statistics over the full quote set."""
    if method not in METHODS:
        raise QuoterError(f"unknown method '{method}'; known methods: {', '.join(METHODS)}")
    if out is not None:
        check_output_file(out, "metrics file")
    if plot is not None:
        check_plot_path(plot)
    if data is None:
        data = EXAMPLE_DATA
        typer.echo(f"no --data given: using the built-in example set {data}", err=True)
    dataset = load_dataset(data, splits=splits, part=part, glosses=glosses)
    language, reason = choose_language(lang, part, dataset.text_sample())
    typer.echo(
        f"{data}: {len(dataset.samples):,} samples, {len(dataset.quotes):,} quotes; "
        f"splits from {dataset.splits_source}; language {language.value} ({reason})",
        err=True,
    )
    # Read after the line above: candidates may add quotes to the set, for this evaluation only.
    choices = None if candidates is None else read_candidates(candidates, dataset)
    started = time.perf_counter()
    options = MethodOptions(
        lang=language,
        crm_aggregate=crm_aggregate,
        model=model,
        pooling=context_pooling,
        gap=gap,
        gloss=gloss,
        bundle=None if bundle is None else str(bundle),
        quotes=None if quotes is None else str(quotes),
        fusion=fusion,
        dense_only=dense_only,
        runtime=runtime,
    )
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
        split.value,
        method,
        left_only=left_only,
        batch_size=batch_size,
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
