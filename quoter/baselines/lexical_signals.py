"""The lexical evidence a hybrid ranker fuses with its dense scores: BM25 and CRM as fusion signals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.baselines.bm25 import BM25Ranker
from quoter.baselines.crm import CRMRanker
from quoter.baselines.lexical_index import LexicalConfig
from quoter.datasets import Sample
from quoter.fusion import Signal
from quoter.languages import Language
from quoter.quote_record import QuoteRecord


def lexical_signals(
    records: Sequence[QuoteRecord],
    known_contexts: Sequence[Sample],
    lang: Language,
    config: LexicalConfig = LexicalConfig(),
) -> dict[str, Signal]:
    """`bm25`: the context against each quote's text with its gloss and source; `crm`: the context against
    the known (training) contexts of each quote, covering only the quotes that have some, so that a quote
    without contexts (added later, or never seen in training) is ranked by the other signals."""
    texts = [" ".join(filter(None, (record.text, record.description))) for record in records]
    signals = {"bm25": Signal(BM25Ranker(texts, lang, config))}
    if known_contexts:
        crm = CRMRanker(len(records), known_contexts, lang, config=config)
        covered = np.zeros(len(records), dtype=bool)
        covered[crm.scored_quotes] = True
        signals["crm"] = Signal(crm, covered)
    return signals
