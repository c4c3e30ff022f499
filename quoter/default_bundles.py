"""The built-in default: for each language, a bundle over the built-in quote bank that learns from the bank's
usage examples (quote_bank/usage.py).

It starts as a zero-shot bundle (the language's default offline model read with its native pooling, quotes
with their glosses) and is made hybrid over the usage examples, as a trained bundle is over its training
contexts: CRM and knn read the examples, quote vectors are pulled towards their examples' contexts, the dense
score is taken less each quote's hubness over the examples (HUBNESS), and the fusion of that dense score with
BM25, CRM and knn is fitted on the examples alone, by cross-fitting: the examples are cut into FOLDS folds
(each quote's examples taken in turn), each fold is ranked with the others as the known contexts, and the pull
and weights that rank all folds best are kept. The held-back real examples take no part; they are what
benchmarks/quality.py measures on.

Encoding the examples takes about a minute on two cores, so what is learned is cached (default_bundle_cache.py).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch

from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.default_bundle_cache import LearnedUsage, cache_path, read_learned, write_learned
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.model_sources import default_model
from quoter.encoders.neighbor_ranker import unit_rows
from quoter.fusion import WEIGHT_GRID, Fusion, FusionRule, HybridRanker, best_weights, hubness, normalized
from quoter.hybrid_bundle import known_signals
from quoter.languages import Language
from quoter.quote_bank import load_quote_bank
from quoter.quote_bank.usage import BankUsage, bank_usage
from quoter.quote_record import QuoteRecord
from quoter.quote_set import encode_quote_set
from quoter.ranking import Query
from quoter.zero_shot_bundle import zero_shot_bundle

# The built-in bank's quotes are read with their glosses and sources: this raised the writer's check of
# every language (benchmarks/quality.py) and the valid MRR of the en and zh-modern dev sets.
DEFAULT_GLOSS = True
# Three folds: each holds one of a quote's three written examples, and ranks with the other two known, much as
# the default knows three (cross-fitting with two folds, one example known, chose a pull of 0 that lost MRR).
FOLDS = 3
# The context window the default reads: 64 tokens around the gap (special tokens and prompt included), about
# 30 words or characters a side. Measured on the held-back real examples (MRR) and the writer's check (top 3)
# against the models' own limit of 256: en 0.262 / 83% against 0.248 / 86%, zh 0.165 / 78% against 0.168 / 75%
# (128 tokens), zh-classical 0.324 / 89% against 0.288 / 81% (32 tokens: 0.311, 96: 0.299); it also halves the
# time of encoding the real examples, whose contexts are 40 words or 50 characters a side.
CONTEXT_TOKENS = 64
# How far quote vectors may move towards their examples' contexts (usage_vectors); cross-fitted. 2.0 was tried
# too and never chosen for any bank; each value costs a search over WEIGHT_GRID at the first start.
PULL_GRID = (0.0, 0.5, 1.0)
# The dense score is taken less each quote's hubness over this many known contexts (fusion.hubness): pulled
# quotes come closer to every context (in the e5 space contexts are closer to each other than to quotes), and
# without it a quote without examples, one a user adds among them, sank far below where the untrained model
# puts it (benchmarks.quality's default-unseen: zh MRR 0.002 against 0.059 zero-shot), for about 0.01 of the
# default's MRR.
HUBNESS = 10


def default_bundles(
    languages: Sequence[Language], batch_size: int = ENCODE_BATCH, warn: Callable[[str], None] = print
) -> list[Bundle]:
    """The built-in default bundle of each language, its learned values read from the cache or learned now
    (with a progress bar) and cached; `warn` is told when they cannot be cached. Languages with the same
    model share one copy of it (modern and classical Chinese do)."""
    bundles: list[Bundle] = []
    models: dict[str, Bundle] = {}
    for language in languages:
        name = default_model(language)
        if name not in models:
            models[name] = windowed(zero_shot_bundle(language, [], model=name, gloss=DEFAULT_GLOSS))
        quotes = load_quote_bank(language)
        base = replace(models[name], language=language)
        bundles.append(learned_bundle(base, quotes, bank_usage(language, quotes), batch_size, warn))
    return bundles


def windowed(bundle: Bundle, tokens: int = CONTEXT_TOKENS) -> Bundle:
    """`bundle` with a context encoder that reads `tokens` tokens around the gap (special tokens included)."""
    encoder = bundle.context_encoder
    config = replace(encoder.config, max_length=tokens)
    return replace(bundle, context_encoder=ContextEncoder(encoder.model, encoder.tokenizer, config))


def learned_bundle(
    base: Bundle,
    quotes: Sequence[QuoteRecord],
    usage: BankUsage,
    batch_size: int = ENCODE_BATCH,
    warn: Callable[[str], None] = print,
) -> Bundle:
    """The bundle of `base`'s encoders over `quotes`, made hybrid over the fit examples of `usage` (samples
    over `quotes`) by learn_usage, or by the values cached for the same encoders, quotes and examples; without
    examples, zero-shot."""
    examples = usage.fit
    if not examples:
        vectors = encode_quote_set(base.quote_encoder, quotes, batch_size=batch_size).vectors
        return replace(base, quotes=list(quotes), quote_vectors=vectors)
    path = cache_path(base, quotes, examples, usage.fit_real, recipe())
    learned = read_learned(path)
    if learned is None or len(learned.quote_vectors) != len(quotes):
        with every_core():
            vectors = encode_quote_set(base.quote_encoder, quotes, batch_size=batch_size).vectors
            bundle = replace(base, quotes=list(quotes), quote_vectors=vectors)
            learned = learn_usage(bundle, examples, usage.fit_real, batch_size)
        try:
            write_learned(path, learned)
        except OSError as error:
            warn(f"{path}: cannot cache what the {base.language.value} default learned ({error.strerror or error})")
    return replace(
        base,
        quotes=list(quotes),
        info={**base.info, "usage_examples": len(examples), "usage_pull": learned.pull, "usage_fit_mrr": learned.mrr},
        quote_vectors=usage_vectors(learned.quote_vectors, examples, learned.example_vectors, learned.pull),
        fusion=learned.fusion,
        known_contexts=list(examples),
        known_vectors=learned.example_vectors,
    )


@contextmanager
def every_core() -> Iterator[None]:
    """torch on every core for the while: learning runs once, before a server answers anything, and the
    server's own thread count (half the cores) would make the first start nearly twice as long."""
    before = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def recipe(rule: FusionRule = FusionRule.ZSCORE) -> str:
    """The settings learn_usage fits with, for the cache key."""
    return f"folds {FOLDS} pulls {PULL_GRID} weights {WEIGHT_GRID} {rule.value} hubness {HUBNESS}"


def learn_usage(
    bundle: Bundle,
    examples: Sequence[Sample],
    real: Sequence[bool],
    batch_size: int = ENCODE_BATCH,
    rule: FusionRule = FusionRule.ZSCORE,
) -> LearnedUsage:
    """What `bundle` learns from the usage `examples` (samples over its quotes; `real[i]`: whether example i
    is real, else written): their context vectors, and the pull of its quote vectors towards them
    (usage_vectors) and the fusion, both cross-fitted."""
    vectors = encoded_examples(bundle, examples, batch_size)
    pull, fusion, mrr = cross_fitted(bundle, examples, vectors, balanced_weights(real), rule)
    return LearnedUsage(bundle.quote_vectors, vectors, pull, fusion, mrr)


def encoded_examples(bundle: Bundle, examples: Sequence[Sample], batch_size: int) -> np.ndarray:
    """The examples' context vectors, with a progress bar on a terminal."""
    queries = [Query(sample.left, sample.right) for sample in examples]
    label = f"{bundle.language.value}: learning from usage examples (once; cached)"
    return bundle.context_encoder.encode(queries, batch_size, progress_label=label)


def usage_vectors(
    quote_vectors: np.ndarray, examples: Sequence[Sample], vectors: np.ndarray, pull: float
) -> np.ndarray:
    """Quote vectors moved towards the contexts they are used in: each quote with examples gets its vector
    plus `pull` times the unit mean of its examples' context vectors, scaled back to its own length."""
    sums = np.zeros_like(quote_vectors, dtype=np.float64)
    np.add.at(sums, [s.quote_id for s in examples], unit_rows(vectors))
    used = np.linalg.norm(sums, axis=1) > 0
    moved = quote_vectors.astype(np.float64)
    lengths = np.linalg.norm(moved[used], axis=1, keepdims=True)
    moved[used] = unit_rows(unit_rows(moved[used]) + pull * unit_rows(sums[used])) * lengths
    return moved.astype(np.float32)


def folds_of(examples: Sequence[Sample]) -> np.ndarray:
    """The fold of each example: a quote's examples go to the folds in turn, so that every quote with two
    examples or more is known in each fold."""
    seen: defaultdict[int, int] = defaultdict(int)
    folds = np.zeros(len(examples), dtype=np.int64)
    for row, sample in enumerate(examples):
        folds[row] = seen[sample.quote_id] % FOLDS
        seen[sample.quote_id] += 1
    return folds


def balanced_weights(real: Sequence[bool]) -> np.ndarray:
    """Weights of the examples that give the real and the written ones half the total each (all alike where
    one kind is missing): writers' contexts and those of published prose differ, and the default should
    answer both, while written examples outnumber real ones several times."""
    kinds = np.asarray(real, dtype=bool)
    weights = np.ones(len(kinds))
    for kind in (True, False):
        if kinds.any() and not kinds.all():
            weights[kinds == kind] = 0.5 / np.count_nonzero(kinds == kind)
    return weights


def cross_fitted(
    bundle: Bundle, examples: Sequence[Sample], vectors: np.ndarray, row_weights: np.ndarray, rule: FusionRule
) -> tuple[float, Fusion, float]:
    """The pull (of PULL_GRID) and fusion weights that rank each fold of `examples` best with the other folds
    as known contexts (each example weighing `row_weights`), and their MRR over all folds."""
    folds = folds_of(examples)
    order = np.concatenate([np.flatnonzero(folds == fold) for fold in range(FOLDS)])
    gold = [examples[i].quote_id for i in order]
    lexical = [fold_views(bundle, examples, vectors, folds, fold, rule) for fold in range(FOLDS)]
    best: tuple[float, Fusion, float] | None = None
    for pull in PULL_GRID:
        views = {name: np.concatenate([part[name] for part in lexical]) for name in lexical[0]}
        views["dense"] = np.concatenate(
            [dense_view(bundle, examples, vectors, folds, fold, pull, rule) for fold in range(FOLDS)]
        )
        fusion, mrr = best_weights(views, gold, rule, row_weights=row_weights[order])
        if best is None or mrr > best[2] + 1e-12:
            best = (pull, replace(fusion, hubness=HUBNESS), mrr)
    assert best is not None
    return best


def fold_views(
    bundle: Bundle, examples: Sequence[Sample], vectors: np.ndarray, folds: np.ndarray, fold: int, rule: FusionRule
) -> dict[str, np.ndarray]:
    """BM25, CRM and knn scores of the examples of `fold`, the other folds known, normalised by `rule`."""
    known, held = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
    part = replace(bundle, known_contexts=[examples[i] for i in known], known_vectors=vectors[known])
    signals = known_signals(part, bundle.quotes)
    queries = [Query(examples[i].left, examples[i].right) for i in held]
    raw = HybridRanker(signals, Fusion(rule)).signal_scores(queries, vectors[held], list(signals))
    return {name: normalized(matrix, rule, signals[name].covered) for name, matrix in raw.items()}


def dense_view(
    bundle: Bundle,
    examples: Sequence[Sample],
    vectors: np.ndarray,
    folds: np.ndarray,
    fold: int,
    pull: float,
    rule: FusionRule,
) -> np.ndarray:
    """The dense scores of the examples of `fold` over the quote vectors pulled towards the other folds, less
    the quotes' hubness over those folds."""
    known, held = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
    moved = usage_vectors(bundle.quote_vectors, [examples[i] for i in known], vectors[known], pull)
    return normalized(vectors[held] @ moved.T - hubness(moved, vectors[known], HUBNESS)[None, :], rule)
