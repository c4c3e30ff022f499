"""Convert a version 1 bundle, which named its sememe lexicon by a path outside its folder, into a
self-contained one: the lexicon is read once more (from the recorded path, or one given now) and saved
inside the new bundle's quote encoder, and each encoder is saved in its own format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quoter.bundle import (
    CONTEXT_FOLDER,
    QUOTE_FOLDER,
    SETTINGS_FILE,
    UPGRADABLE_VERSION,
    Bundle,
    check_bundle_folder,
    check_bundle_output,
    read_bundle_settings,
)
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.model_sources import load_pretrained
from quoter.encoders.pooling import GapMarker, Pooling, PoolingMode
from quoter.encoders.quote_encoder import CONFIG_FILE, SAVED_FORMAT, SEMEMES_FILE, QuoteEncoder
from quoter.encoders.saved_encoder import load_encoder_model, read_encoder_settings
from quoter.languages import Language
from quoter.saved_config import from_json
from quoter.sememes.alignment import SememeAnnotator
from quoter.sememes.sources import LexiconConfig, load_lexicon

# The quote encoder's format inside a version 1 bundle.
OLD_QUOTE_ENCODER_VERSION = 1


def upgrade_bundle(old: Path, new: Path, lexicon: str | None = None) -> Bundle:
    """Read the version 1 bundle in `old` and write it as a current bundle to `new`; `lexicon` replaces the
    lexicon source it recorded (a word-sememe file or 'openhownet'), e.g. when that path was relative to
    another folder."""
    folder = check_bundle_folder(old)
    settings = read_bundle_settings(folder / SETTINGS_FILE, UPGRADABLE_VERSION)
    check_bundle_output(new, "NEW")
    language = Language(settings["language"])
    # Bundles saved before pooling was a setting name only the pooling mode and had the mask token in the gap.
    context_settings = settings["context_encoder"]
    context_config = ContextEncoderConfig(
        max_length=int(context_settings["max_length"]),
        pooling=old_pooling(context_settings["pooling"], folder / SETTINGS_FILE),
        gap=GapMarker(context_settings.get("gap", GapMarker.MASK.value)),
    )
    context_model, context_tokenizer = load_pretrained(str(folder / CONTEXT_FOLDER))
    quote_folder = folder / QUOTE_FOLDER
    required = ("max_length", "alpha", "sememe_names")
    quote_settings = read_encoder_settings(
        quote_folder, CONFIG_FILE, "quote encoder", SAVED_FORMAT, OLD_QUOTE_ENCODER_VERSION, required
    )
    quote_config = QuoteEncoderConfig(
        max_length=int(quote_settings["max_length"]),
        alpha=float(quote_settings["alpha"]),
        pooling=old_pooling(quote_settings.get("pooling", PoolingMode.CLS.value), quote_folder / CONFIG_FILE),
        gloss=bool(quote_settings.get("gloss", False)),
    )
    reference = settings.get("lexicon")
    annotator = None
    if reference is not None:
        config = LexiconConfig(
            source=lexicon or str(reference["source"]),
            cedict=reference.get("cedict"),
            lemmas=reference.get("lemmas"),
        )
        annotator = SememeAnnotator(load_lexicon(config, language), language)
    quote_model, quote_tokenizer = load_encoder_model(quote_folder)
    quote_encoder = QuoteEncoder(quote_model, quote_tokenizer, quote_config, annotator, quote_settings["sememe_names"])
    quote_encoder.load_sememe_embeddings(quote_folder / SEMEMES_FILE)
    context_encoder = ContextEncoder(context_model, context_tokenizer, context_config)
    bundle = Bundle.with_encoders(folder, settings, context_encoder, quote_encoder)
    bundle.save(new)
    return bundle


def old_pooling(saved: Any, path: Path) -> Pooling:
    """A version 1 bundle's pooling setting, read from `path`: as saved encoders write it, or a bare mode name
    (bundles saved before pooling was a part), which means that mode with no prompt and no normalisation."""
    return from_json(Pooling, {"mode": saved} if isinstance(saved, str) else saved, path)
