"""The recommendation methods `quoter evaluate --method` knows, each built from a dataset and options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from quoter.baselines import BM25Ranker, CRMRanker, LexicalConfig
from quoter.baselines.crm import Aggregate
from quoter.datasets import QuoteDataset
from quoter.encoders.backend.runtime_config import RUNTIME_HELP, ContextRuntime
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.model_sources import DEFAULT_MODELS, OFFLINE_MODELS, OFFLINE_PREFIX
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.errors import InputError, QuoterError
from quoter.fusion import FusionRule
from quoter.languages import Language
from quoter.ranking import Ranker
from quoter.settings import setting

if TYPE_CHECKING:
    from quoter.bundle import Bundle
    from quoter.encoders.ranker import ContextVectors

MODEL_HELP = (
    "encoder: Hugging Face model name, local model folder, or an offline name "
    f"({', '.join(OFFLINE_PREFIX + name for name in OFFLINE_MODELS)}). Default per language: "
    + ", ".join(f"{language.value} {name}" for language, name in DEFAULT_MODELS.items())
)


@dataclass(frozen=True)
class MethodOptions:
    """Everything a method may need beyond the dataset; each method reads the fields that concern it."""

    lang: Language = setting(Language.EN, "Language of the lexical methods")
    crm_aggregate: Aggregate = setting(Aggregate.MAX, "crm: how the scores of a quote's training contexts are combined")
    lexical: LexicalConfig = LexicalConfig()
    model: str | None = setting(None, MODEL_HELP)
    pooling: PoolingChoice = setting(
        PoolingChoice.NATIVE,
        "encoder: the model's native pooling (mean and cosine for the offline models), the paper's (context at the "
        "[MASK] in the gap, quote at [CLS]), BERT-Sim's [CLS], or mean pooling",
    )
    gap: GapMarker | None = setting(
        None, "encoder, mean pooling: what stands in the gap (mask token, '___', nothing). Default: the model's"
    )
    gloss: bool = setting(False, "encoder: read each quote with its gloss, given by --glosses")
    encode_batch_size: int = setting(ENCODE_BATCH, "encoder: quotes and contexts per encoder forward pass")
    bundle: str | None = setting(None, "bundle: folder of a bundle written by `quoter train`")
    quotes: str | None = setting(
        None, "bundle: a quote set written by `quoter encode` with the bundle. Default: the bundle's own quotes"
    )
    fusion: FusionRule = setting(
        FusionRule.ZSCORE,
        "hybrid: how the encoder's, BM25's and CRM's scores are made comparable before their weighted sum (z-scores, "
        "or reciprocal rank fusion); the weights are fitted on the valid split",
    )
    dense_only: bool = setting(False, "bundle: rank by a hybrid bundle's dense score alone, unfused")
    runtime: ContextRuntime = setting(ContextRuntime.TORCH, RUNTIME_HELP)


def _bm25(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    return BM25Ranker(dataset.quotes, options.lang, options.lexical)


def _crm(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    return CRMRanker(len(dataset.quotes), dataset.split("train"), options.lang, options.crm_aggregate, options.lexical)


def _encoder(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    from quoter.hybrid_bundle import bundle_ranker

    bundle = _zero_shot(dataset, options)
    return bundle_ranker(bundle, options.encode_batch_size, _runtime(bundle, options))


def _zero_shot(dataset: QuoteDataset, options: MethodOptions) -> Bundle:
    """One pretrained model for both encoders, without sememes (untrained sememe embeddings are noise)."""
    # Imported here: torch and transformers take seconds to import, which every other command would pay.
    from quoter.zero_shot_bundle import zero_shot_bundle

    return zero_shot_bundle(
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
    from quoter.hybrid_bundle import ranker_over
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
    return ranker_over(bundle, quotes.records, quotes.vectors, options.encode_batch_size, runtime)


def _runtime(bundle: Bundle, options: MethodOptions, folder: Path | None = None) -> tuple[str, ContextVectors]:
    """What runs the bundle's context encoder, as options.runtime asks (ONNX graphs cached in `folder`)."""
    from quoter.encoders.backend.context_runtime import choose_runtime

    chosen = choose_runtime(bundle, options.runtime, folder)
    return chosen.describe(), chosen.encoder


def _hybrid(dataset: QuoteDataset, options: MethodOptions) -> Ranker:
    from quoter.hybrid_bundle import bundle_ranker, make_hybrid

    valid = dataset.split("valid")
    if not valid:
        raise InputError("hybrid fits its fusion on the valid split, which is empty", path=dataset.path)
    # The zero-shot bundle of `encoder`, made hybrid over the train split's contexts.
    bundle = _zero_shot(dataset, options)
    bundle.lexical = options.lexical
    make_hybrid(bundle, dataset.split("train"), valid, options.fusion, options.encode_batch_size)
    return bundle_ranker(bundle, options.encode_batch_size, _runtime(bundle, options))


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
