"""A bundle's ranking, and making a bundle hybrid. A hybrid bundle keeps the training contexts (for CRM) and
their vectors (for knn), and ranks by the fusion of its dense score with BM25, CRM and knn, fitted on the valid
contexts; any other bundle ranks by its dense score alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from quoter.baselines.lexical_signals import lexical_signals
from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.neighbor_ranker import NeighborRanker
from quoter.encoders.ranker import ContextVectors, EncoderRanker
from quoter.fusion import FusionRule, HybridRanker, Signal, fit_hybrid, hubness
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query, Ranker


def bundle_ranker(
    bundle: Bundle, batch_size: int = ENCODE_BATCH, runtime: tuple[str, ContextVectors] | None = None
) -> Ranker:
    """A Ranker over the bundle's quote set with its frozen vectors, fused with the lexical signals when the
    bundle is hybrid; `runtime` as for `ranker_over`."""
    return ranker_over(bundle, bundle.quotes, bundle.quote_vectors, batch_size, runtime)


def ranker_over(
    bundle: Bundle,
    records: Sequence[QuoteRecord],
    vectors: np.ndarray,
    batch_size: int = ENCODE_BATCH,
    runtime: tuple[str, ContextVectors] | None = None,
) -> Ranker:
    """The bundle's ranking over another quote set (its vectors encoded by the bundle): CRM keeps the known
    contexts of the quotes the set shares with the bundle. `runtime`: (its description, an encoder that runs
    the context encoder otherwise, e.g. ONNX Runtime); None: the context encoder itself."""
    name, context = runtime or ("torch", bundle.context_encoder)
    if bundle.fusion is None:
        return EncoderRanker(context, vectors, batch_size, name)
    offsets = hubness(vectors, bundle.known_vectors, bundle.fusion.hubness) if bundle.fusion.hubness else None
    dense = EncoderRanker(context, vectors, batch_size, name, offsets)
    signals = {"dense": Signal(dense), **known_signals(bundle, records)}
    return HybridRanker(signals, bundle.fusion, lambda queries: context.encode(queries, batch_size))


def known_signals(
    bundle: Bundle,
    records: Sequence[QuoteRecord],
    added: Sequence[Sample] = (),
    added_vectors: np.ndarray | None = None,
) -> dict[str, Signal]:
    """BM25 over `records`, and CRM and knn over the known contexts of the quotes (by text) they share with
    the bundle and the `added` ones (samples whose quote_id indexes `records`, e.g. the usage examples a
    quote was added with at run time; their context vectors `added_vectors`, row for row): the side of a
    hybrid bundle's ranking beyond the dense score, for any quote set."""
    id_of = {record.text: index for index, record in enumerate(records)}
    rows = [row for row, sample in enumerate(bundle.known_contexts) if bundle.quotes[sample.quote_id].text in id_of]
    contexts = [bundle.known_contexts[row] for row in rows]
    contexts = [replace(sample, quote_id=id_of[bundle.quotes[sample.quote_id].text]) for sample in contexts]
    contexts += added
    signals = lexical_signals(records, contexts, bundle.language, bundle.lexical)
    if bundle.known_vectors is not None and contexts:
        vectors = [bundle.known_vectors[rows], *([] if added_vectors is None else [added_vectors])]
        neighbors = NeighborRanker(len(records), contexts, np.concatenate(vectors))
        signals["knn"] = Signal(neighbors, neighbors.covered)
    return signals


def make_hybrid(
    bundle: Bundle,
    train: Sequence[Sample],
    valid: Sequence[Sample],
    rule: FusionRule,
    batch_size: int,
    encode: Callable[[Sequence[Sample]], np.ndarray] | None = None,
) -> dict[str, float]:
    """Give `bundle` the known contexts `train` with their vectors and the fusion fitted on `valid`; returns
    the valid MRRs: `fused`, and each signal's alone. `encode` gives the context vectors of samples, as the
    bundle's context encoder would (training reads them from the frozen layers' kept output); None: the
    context encoder itself."""
    context = bundle.context_encoder
    if encode is None:

        def encode(samples: Sequence[Sample]) -> np.ndarray:
            return context.encode([Query(sample.left, sample.right) for sample in samples], batch_size)

    bundle.known_contexts = list(train)
    bundle.known_vectors = encode(train)
    dense = EncoderRanker(context, bundle.quote_vectors, batch_size)
    signals = {"dense": Signal(dense), **known_signals(bundle, bundle.quotes)}
    queries = [Query(sample.left, sample.right) for sample in valid]
    hybrid, mrrs = fit_hybrid(signals, queries, [sample.quote_id for sample in valid], rule, encode(valid))
    bundle.fusion = hybrid.fusion
    return mrrs
