"""Making a bundle hybrid: it keeps the training contexts (for CRM) and their vectors (for knn), and the fusion
of its dense score with BM25, CRM and knn is fitted on the valid contexts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.encoders.ranker import EncoderRanker
from quoter.fusion import FusionRule, Signal, fit_hybrid
from quoter.ranking import Query


def make_hybrid(
    bundle: Bundle, train: Sequence[Sample], valid: Sequence[Sample], rule: FusionRule, batch_size: int
) -> dict[str, float]:
    """Give `bundle` the known contexts `train` with their vectors and the fusion fitted on `valid`; returns
    the valid MRRs: `fused`, and each signal's alone."""
    context = bundle.context_encoder

    def encode(queries: Sequence[Query]) -> np.ndarray:
        return context.encode(queries, batch_size)

    bundle.known_contexts = list(train)
    bundle.known_vectors = encode([Query(sample.left, sample.right) for sample in train])
    dense = EncoderRanker(context, bundle.quote_vectors, batch_size)
    signals = {"dense": Signal(dense), **bundle.known_signals_over(bundle.quotes)}
    queries = [Query(sample.left, sample.right) for sample in valid]
    hybrid, mrrs = fit_hybrid(signals, queries, [sample.quote_id for sample in valid], rule, encode)
    bundle.fusion = hybrid.fusion
    return mrrs
