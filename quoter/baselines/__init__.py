"""Lexical baselines of the paper's tables: BM25 against quote texts, and CRM against known contexts."""

from quoter.baselines.bm25 import BM25Ranker
from quoter.baselines.crm import CRMRanker
from quoter.baselines.lexical_index import LexicalConfig, LexicalIndex
from quoter.baselines.lexical_tokens import lexical_tokens

__all__ = ["BM25Ranker", "CRMRanker", "LexicalConfig", "LexicalIndex", "lexical_tokens"]
