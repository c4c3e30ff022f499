"""`quoter evaluate`: rank every context of a split against the whole quote set and report the metrics."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.atomic_files import check_not_an_input, check_output_file, write_json_atomic
from quoter.baselines.crm import Aggregate
from quoter.cli.options import QUOTE_SET_HELP, RUNTIME_HELP, CommandSettings, PartOption, SplitsOption
from quoter.datasets import load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.encoders.model_sources import DEFAULT_MODELS, OFFLINE_MODELS, OFFLINE_PREFIX
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.encoders.ranker import EncoderRanker
from quoter.evaluation import evaluate, render_report
from quoter.evaluation.candidates import read_candidates
from quoter.evaluation.plot import check_plot_path, write_plot
from quoter.evaluation.settings import EvaluateSettings, Split
from quoter.fusion import FusionRule, HybridRanker
from quoter.languages import Language, choose_language
from quoter.methods import METHODS, build_ranker

SETTINGS = CommandSettings(EvaluateSettings, "crm_aggregate=sum", "YAML settings of the evaluation.")
ConfigOption, SetOption = SETTINGS.config_option, SETTINGS.set_option
MODEL_HELP = (
    "encoder: Hugging Face model name, local model folder, or an offline name "
    f"({', '.join(OFFLINE_PREFIX + name for name in OFFLINE_MODELS)}). Default per language: "
    + ", ".join(f"{language.value} {name}" for language, name in DEFAULT_MODELS.items())
)
POOLING_HELP = (
    "encoder: the model's native pooling (mean and cosine for the offline models), the paper's (context at the "
    "[MASK] in the gap, quote at [CLS]), BERT-Sim's [CLS], or mean pooling"
)
FUSION_HELP = (
    "hybrid: how the encoder's, BM25's and CRM's scores are made comparable before their weighted sum (z-scores, "
    "or reciprocal rank fusion); the weights are fitted on the valid split"
)


def evaluate_command(
    context: typer.Context,
    config: ConfigOption = None,
    set_: SetOption = None,
    method: str = SETTINGS.option("method", f"Recommendation method: {', '.join(METHODS)}"),
    data: Annotated[
        Optional[Path],
        typer.Option(help="QuoteR TSV or JSONL file. Default: the small built-in example set of English proverbs."),
    ] = None,
    splits: SplitsOption = None,
    part: PartOption = None,
    split: Split = SETTINGS.option("split", "Which split's contexts to rank"),
    left_only: bool = SETTINGS.option(
        "left_only", "Drop the right context: autocomplete, the paper's Appendix B", "--left-only"
    ),
    lang: Optional[Language] = SETTINGS.option(
        "lang", "Language for lexical methods. Default: the part's language, else guessed from the quotes"
    ),
    crm_aggregate: Aggregate = SETTINGS.option(
        "crm_aggregate", "crm: how the scores of a quote's training contexts are combined"
    ),
    model: Optional[str] = SETTINGS.option("model", MODEL_HELP),
    context_pooling: PoolingChoice = SETTINGS.option("pooling", POOLING_HELP, "--context-pooling"),
    gap: Optional[GapMarker] = SETTINGS.option(
        "gap", "encoder, mean pooling: what stands in the gap (mask token, '___', nothing). Default: the model's"
    ),
    glosses: Annotated[
        Optional[Path],
        typer.Option(help="Quote list quote<TAB>source<TAB>gloss giving the data file's quotes their glosses."),
    ] = None,
    gloss: bool = SETTINGS.option(
        "gloss", "encoder: read each quote with its gloss, given by --glosses", "--gloss/--no-gloss"
    ),
    fusion: FusionRule = SETTINGS.option("fusion", FUSION_HELP),
    dense_only: bool = SETTINGS.option(
        "dense_only", "bundle: rank by a hybrid bundle's dense score alone, unfused", "--dense-only"
    ),
    runtime: ContextRuntime = SETTINGS.option("runtime", RUNTIME_HELP),
    candidates: Annotated[
        Optional[Path],
        typer.Option(
            help='Multiple choice as well: JSON lines {"line": N, "candidates": [quote, ...]} (N: 0-based line of '
            "the data file); reports how often the gold quote beats the other candidates."
        ),
    ] = None,
    bundle: Optional[Path] = SETTINGS.option("bundle", "bundle: folder of a bundle written by `quoter train`"),
    quotes: Optional[Path] = SETTINGS.option("quotes", f"bundle: {QUOTE_SET_HELP}"),
    batch_size: int = SETTINGS.option("batch_size", "Contexts scored at once"),
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
    settings = SETTINGS.load(context, evaluate_command, config, set_)
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
