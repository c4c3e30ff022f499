"""The `bm25` method: the query context against the text of each quote."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quoter.baselines.lexical_index import LexicalConfig, LexicalIndex
from quoter.baselines.lexical_tokens import lexical_tokens
from quoter.languages import Language
from quoter.ranking import Query


class BM25Ranker:
    """Ranks quotes by the BM25 score of their text for the words of the context around the gap."""

    def __init__(self, quotes: Sequence[str], lang: Language, config: LexicalConfig = LexicalConfig()) -> None:
        self.lang = lang
        self.index = LexicalIndex([lexical_tokens(q, lang) for q in quotes], config)

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        return self.index.score([lexical_tokens(f"{q.left} {q.right}", self.lang) for q in queries])
