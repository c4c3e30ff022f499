"""The recommendation methods `quoter evaluate --method` knows, each built from a dataset and options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quoter.baselines import BM25Ranker, CRMRanker, LexicalConfig
from quoter.baselines.crm import Aggregate
from quoter.datasets import QuoteDataset
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.errors import InputError, QuoterError
from quoter.fusion import FusionRule
from quoter.languages import Language
from quoter.ranking import Ranker

if TYPE_CHECKING:
    from quoter.bundle import Bundle
    from quoter.encoders.ranker import ContextVectors


@dataclass(frozen=True)
class MethodOptions:
    """Everything a method may need beyond the dataset; each method reads the fields that concern it."""

    lang: Language = Language.EN
    crm_aggregate: Aggregate = Aggregate.MAX
    lexical: LexicalConfig = LexicalConfig()
    model: str | None = None  # encoder: Hugging Face name, local folder or offline:*; None: the language's default
    pooling: PoolingChoice = PoolingChoice.NATIVE  # encoder: the model's native pooling, or a named one
    gap: GapMarker | None = None  # encoder with mean pooling: what stands in the gap; None: the model's choice
    gloss: bool = False  # encoder: quotes are read with their glosses
    encode_batch_size: int = ENCODE_BATCH
    bundle: str | None = None  # bundle: the folder of a trained (or zero-shot) bundle
    quotes: str | None = None  # bundle: a quote set its quote encoder made (`quoter encode`); None: its own quotes
    fusion: FusionRule = FusionRule.ZSCORE  # hybrid: how the signals' scores are made comparable
    dense_only: bool = False  # bundle: rank by a hybrid bundle's dense score alone, without its fusion
    runtime: ContextRuntime = ContextRuntime.TORCH  # encoder, bundle, hybrid: what runs the context encoder


def _bm25(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    return BM25Ranker(dataset.quotes, options.lang, options.lexical)


def _crm(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    return CRMRanker(len(dataset.quotes), dataset.split("train"), options.lang, options.crm_aggregate, options.lexical)


def _encoder(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    bundle = _zero_shot(dataset, options)
    return bundle.ranker_over(bundle.quotes, bundle.quote_vectors, options.encode_batch_size, _runtime(bundle, options))


def _zero_shot(dataset: QuoteDataset, options: MethodOptions) -> Bundle:
    """One pretrained model for both encoders, without sememes (untrained sememe embeddings are noise)."""
    # Imported here: torch and transformers take seconds to import, which every other command would pay.
    from quoter.bundle import Bundle

    return Bundle.zero_shot(
        options.lang,
        dataset.quote_records(),
        options.model,
        options.pooling,
        options.gloss,
        options.gap,
        options.encode_batch_size,
    )


def _bundle(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    from quoter.bundle import Bundle
    from quoter.quote_set import encode_quote_set, read_quote_set

    if options.bundle is None:
        raise QuoterError("the bundle method needs a bundle folder (--bundle DIR)")
    bundle = Bundle.load(options.bundle)
    if options.dense_only:
        bundle.fusion = None
    known = bundle.quote_set()
    if options.quotes is not None:
        known = read_quote_set(Path(options.quotes))
        known.check_encoder(bundle.quote_encoder, Path(options.quotes))
    # Ranks are over the dataset's quote set in its order. A quote the known set holds keeps its record (source
    # and gloss, which a hybrid bundle's BM25 read when its fusion was fitted) and its vector; the others are
    # encoded with the bundle's quote encoder.
    held = {record.text: record for record in known.records}
    records = [held.get(record.text, record) for record in dataset.quote_records()]
    quotes = encode_quote_set(bundle.quote_encoder, records, known, options.encode_batch_size)
    runtime = _runtime(bundle, options, Path(options.bundle))
    return bundle.ranker_over(quotes.records, quotes.vectors, options.encode_batch_size, runtime)


def _runtime(bundle: Bundle, options: MethodOptions, folder: Path | None = None) -> tuple[str, ContextVectors]:
    """What runs the bundle's context encoder, as options.runtime asks (ONNX graphs cached in `folder`)."""
    from quoter.encoders.backend.context_runtime import choose_runtime

    chosen = choose_runtime(bundle, options.runtime, folder)
    return chosen.describe(), chosen.encoder


def _hybrid(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    from quoter.hybrid_bundle import make_hybrid

    valid = dataset.split("valid")
    if not valid:
        raise InputError("hybrid fits its fusion on the valid split, which is empty", path=dataset.path)
    # The zero-shot bundle of `encoder`, made hybrid over the train split's contexts.
    bundle = _zero_shot(dataset, options)
    bundle.lexical = options.lexical
    make_hybrid(bundle, dataset.split("train"), valid, options.fusion, options.encode_batch_size)
    return bundle.ranker_over(bundle.quotes, bundle.quote_vectors, options.encode_batch_size, _runtime(bundle, options))


METHODS: dict[str, Callable[[QuoteDataset, MethodOptions], Ranker]] = {
    "bm25": _bm25,
    "crm": _crm,
    "encoder": _encoder,
    "bundle": _bundle,
    "hybrid": _hybrid,
}


def build_ranker(method: str, dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    """Build the named method over the dataset's full quote set."""
    if method not in METHODS:
        raise QuoterError(f"unknown method '{method}'; known methods: {', '.join(METHODS)}")
    return METHODS[method](dataset, options)
