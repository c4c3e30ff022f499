"""The `crm` method (the paper's CRM, He et al. 2010): the query against the known contexts of each quote."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import numpy as np
import scipy.sparse as sp

from quoter.baselines.lexical_index import LexicalConfig, LexicalIndex
from quoter.baselines.lexical_tokens import lexical_tokens
from quoter.datasets import Sample
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.ranking import Query


class Aggregate(str, Enum):
    """How the BM25 scores of a quote's known contexts become the quote's score."""

    MAX = "max"  # the quote whose known contexts are most similar wins (the paper's description of CRM)
    SUM = "sum"  # every similar context adds evidence, so quotes with many contexts gain


class CRMRanker:
    """Ranks quotes by how similar their training contexts are to the query context.

    A quote without training contexts (a zero-shot quote) scores 0 and so ranks below every quote
    that has a matching context.
    """

    def __init__(
        self,
        n_quotes: int,
        known_contexts: Sequence[Sample],
        lang: Language,
        aggregate: Aggregate = Aggregate.MAX,
        config: LexicalConfig = LexicalConfig(),
    ) -> None:
        if not known_contexts:
            raise QuoterError("crm needs training contexts, and the training split is empty")
        ordered = sorted(known_contexts, key=lambda s: s.quote_id)
        self.lang, self.aggregate, self.n_quotes = lang, aggregate, n_quotes
        self.index = LexicalIndex([lexical_tokens(f"{s.left} {s.right}", lang) for s in ordered], config)
        context_quotes = np.array([s.quote_id for s in ordered])
        self.scored_quotes, self.group_starts = np.unique(context_quotes, return_index=True)
        if aggregate is Aggregate.SUM:
            membership = sp.csr_matrix(
                (np.ones(len(ordered), dtype=np.float32), (np.arange(len(ordered)), context_quotes)),
                shape=(len(ordered), n_quotes),
            )
            self.index = self.index.summed_over(membership)

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        context_scores = self.index.score([lexical_tokens(f"{q.left} {q.right}", self.lang) for q in queries])
        if self.aggregate is Aggregate.SUM:
            return context_scores  # the index already sums each quote's contexts
        scores = np.zeros((len(queries), self.n_quotes), dtype=np.float32)
        scores[:, self.scored_quotes] = np.maximum.reduceat(context_scores, self.group_starts, axis=1)
        return scores
