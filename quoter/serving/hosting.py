"""Which bundles a server hosts: the folders it is given (`LANG=DIR`), or else the built-in default, a
zero-shot bundle over the built-in quote bank for each language."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quoter.bundle import Bundle
from quoter.encoders.model_sources import default_model
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.serving.recommender import Recommender, RecommenderConfig


def parse_bundle_spec(spec: str) -> tuple[Language, Path]:
    """Read `LANG=DIR`, e.g. `en=models/en`."""
    name, sep, folder = spec.partition("=")
    if not sep or not folder:
        raise QuoterError(f"--bundle expects LANG=DIR, got '{spec}'")
    try:
        return Language(name.strip()), Path(folder)
    except ValueError:
        known = ", ".join(language.value for language in Language)
        raise QuoterError(f"unknown language '{name}' in --bundle {spec}; languages: {known}") from None


def load_hosted(specs: Sequence[str], config: RecommenderConfig) -> list[Recommender]:
    """Recommenders for bundle folders given as `LANG=DIR`; quote changes are saved into each folder."""
    recommenders = []
    for spec in specs:
        language, folder = parse_bundle_spec(spec)
        bundle = Bundle.load(folder)
        if bundle.language is not language:
            raise InputError(f"the bundle's language is {bundle.language.value}, not {language.value}", path=folder)
        recommenders.append(Recommender(bundle, config, folder))
    return recommenders


# The built-in bank's quotes are read with their glosses and sources: this raised the writer's check of
# every language (benchmarks/quality.py) and the valid MRR of the en and zh-modern dev sets.
DEFAULT_GLOSS = True


def default_bundles(languages: Sequence[Language]) -> list[Bundle]:
    """Zero-shot bundles over the built-in quote bank, in the languages' default offline models read with
    their native pooling, quotes with their glosses; languages with the same model share one copy of it
    (modern and classical Chinese do)."""
    from quoter.quote_bank import load_quote_bank

    bundles: list[Bundle] = []
    by_model: dict[str, Bundle] = {}
    for language in languages:
        quotes = load_quote_bank(language)
        shared = by_model.get(default_model(language))
        if shared is None:
            bundle = Bundle.zero_shot(language, quotes, model=default_model(language), gloss=DEFAULT_GLOSS)
            by_model[default_model(language)] = bundle
        else:
            vectors = shared.quote_encoder.encode_records(quotes)
            bundle = Bundle(language, shared.context_encoder, shared.quote_encoder, quotes, vectors, info=shared.info)
        bundles.append(bundle)
    return bundles
