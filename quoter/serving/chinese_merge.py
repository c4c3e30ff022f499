"""One answer from two Chinese banks, for Chinese text sent without `lang` while both are hosted.

Writers write modern Chinese and may want a modern saying or a classical line, so the question is which
bank's quote fits, not which register the text is in: both banks rank the text, each whole, and their
quotes are merged into one list by their standing in their own bank, a quote's score (a hybrid bundle's
fused score, else the dense one) as a z-score over every quote of its bank for this context. The banks' own
scores do not compare: fused scores are sums of z-scores under each bundle's own weights, and even the
cosines of one encoder carry the register of the text, modern text lying nearer every modern saying than
any classical line. The standing takes away each bank's level and spread for the context and keeps how far
a quote stands out from the rest of its bank, whatever the bank's score is. benchmarks/chinese_routing.py
measures it against the routing by function words it replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from quoter.fusion import FusionRule, normalized
from quoter.languages import Language
from quoter.serving.live.live_quotes import ScoredQuote


@dataclass(frozen=True)
class BankQuote:
    """A quote of a merged answer and the bank (language) it comes from; its score is its standing."""

    lang: Language
    found: ScoredQuote


def standing(scores: np.ndarray) -> np.ndarray:
    """Each quote's standing in its bank: its score as a z-score over the bank's quotes, for each context
    (rows); where every quote of the bank scores alike, each stands at 0."""
    return normalized(scores, FusionRule.ZSCORE)


def merge_banks(ranked: Mapping[Language, Sequence[ScoredQuote]], k: int) -> list[BankQuote]:
    """The k best quotes of banks ranked whole for one context (each bank's every quote), by standing, best
    first; a tie goes to the bank named first."""
    merged: list[BankQuote] = []
    for lang, found in ranked.items():
        if found:
            standings = standing(np.array([[quote.score for quote in found]]))[0]
            merged += [BankQuote(lang, replace(quote, score=float(z))) for quote, z in zip(found, standings)]
    merged.sort(key=lambda quote: -quote.found.score)
    return merged[:k]
