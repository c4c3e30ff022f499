"""A bm25s index that scores a whole batch of queries against every document in one sparse product."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class LexicalConfig:
    """BM25 settings shared by the lexical baselines (bm25s defaults, Lucene's variant); a hybrid bundle keeps
    those of its BM25 and CRM signals in its bundle.json."""

    k1: float = 1.5
    b: float = 0.75


class LexicalIndex:
    """BM25 weights of tokenised documents, computed by bm25s, as a sparse (vocabulary x documents) matrix.

    Scoring a query sums the weights of its tokens, repeated tokens as often as they occur, exactly
    as `bm25s.BM25.get_scores` does; doing it for many queries at once is one sparse matrix product.
    """

    def __init__(self, documents: Sequence[list[str]], config: LexicalConfig = LexicalConfig()) -> None:
        if not documents:
            raise ValueError("a lexical index needs at least one document")
        bm25 = bm25s.BM25(k1=config.k1, b=config.b, method="lucene")
        # Numbered here, in first-seen order: bm25s numbers words in a set's order, which changes with Python's
        # hash seed, and with it the order a query's weights are summed in (scores then differ in their last
        # bits from one process to another).
        vocabulary: dict[str, int] = {}
        ids = [[vocabulary.setdefault(token, len(vocabulary)) for token in document] for document in documents]
        bm25.index((ids, vocabulary), show_progress=False)
        scores = bm25.scores
        self.vocabulary: dict[str, int] = bm25.vocab_dict
        self.n_documents = int(scores["num_docs"])
        self.weights = sp.csr_matrix(
            (scores["data"], scores["indices"], scores["indptr"]),
            shape=(len(scores["indptr"]) - 1, self.n_documents),
        )

    def summed_over(self, membership: sp.spmatrix) -> LexicalIndex:
        """An index whose documents are groups of this one's (membership: documents x groups, 0/1).

        A group's score is the sum of its documents' scores; since scoring is linear, summing the
        weights once makes scoring as cheap as scoring one document per group.
        """
        grouped = copy.copy(self)
        grouped.weights = sp.csr_matrix(self.weights @ membership)
        grouped.n_documents = membership.shape[1]
        return grouped

    def query_matrix(self, queries: Sequence[list[str]]) -> sp.csr_matrix:
        """Token counts of each query over the index vocabulary; unknown tokens are dropped."""
        rows, cols = [], []
        for row, tokens in enumerate(queries):
            ids = [self.vocabulary[t] for t in tokens if t in self.vocabulary]
            rows.extend([row] * len(ids))
            cols.extend(ids)
        data = np.ones(len(cols), dtype=np.float32)
        matrix = sp.csr_matrix((data, (rows, cols)), shape=(len(queries), self.weights.shape[0]))
        matrix.sum_duplicates()
        return matrix

    def score(self, queries: Sequence[list[str]]) -> np.ndarray:
        """BM25 score of every document for each tokenised query: shape (len(queries), n_documents)."""
        return (self.query_matrix(queries) @ self.weights).toarray().astype(np.float32, copy=False)
