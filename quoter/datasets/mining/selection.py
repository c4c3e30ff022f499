"""From all occurrences to a dataset, as the paper does: deduplicate, filter, cap, and split 8:1:1."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pair:
    """A context-quote pair; `document_id` is -1 for pairs from example sentences."""

    left: str
    quote_id: int
    right: str
    document_id: int


@dataclass
class PairCollector:
    """Distinct pairs per quote, and the corpus documents each quote was found in."""

    pairs: dict[int, list[Pair]] = field(default_factory=dict)
    documents: dict[int, set[int]] = field(default_factory=dict)
    duplicates: int = 0
    _seen: set[tuple[str, int, str]] = field(default_factory=set, repr=False)

    def add(self, pair: Pair) -> None:
        """Keep `pair` unless the same left context, quote and right context came before."""
        key = (pair.left, pair.quote_id, pair.right)
        if key in self._seen:
            self.duplicates += 1
            return
        self._seen.add(key)
        self.pairs.setdefault(pair.quote_id, []).append(pair)
        if pair.document_id >= 0:
            self.documents.setdefault(pair.quote_id, set()).add(pair.document_id)


def formulaic_quotes(
    documents: dict[int, set[int]], n_documents: int, max_share: float, min_documents: int
) -> dict[int, int]:
    """Quotes found in more than `max_share` of the documents, with their document counts.

    Such "quotes" are stock phrases of every book; the cap is off below `min_documents` documents.
    """
    if n_documents < min_documents:
        return {}
    limit = max_share * n_documents
    return {quote_id: len(found) for quote_id, found in documents.items() if len(found) > limit}


def cap_pairs(pairs: list[Pair], max_pairs: int, rng: random.Random) -> list[Pair]:
    """At most `max_pairs` pairs, sampled at random, in their original order."""
    if len(pairs) <= max_pairs:
        return pairs
    chosen = sorted(rng.sample(range(len(pairs)), max_pairs))
    return [pairs[index] for index in chosen]


def zero_shot_count(n_quotes: int, requested: int, max_fraction: float) -> int:
    """How many quotes occur only in valid and test: as requested, but about a share of a small set at most."""
    return min(requested, math.floor(n_quotes * max_fraction + 0.5))


@dataclass(frozen=True)
class Split:
    """Pairs per split (each shuffled) and the quotes kept out of train."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    zero_shot: list[int]


def split_pairs(
    pairs_by_quote: dict[int, list[Pair]],
    valid_fraction: float,
    test_fraction: float,
    zero_shot: int,
    rng: random.Random,
) -> Split:
    """Split about train:valid:test = (1 - v - t):v:t so that every quote is in valid and in test.

    `zero_shot` random quotes have all their pairs in valid and test; every other quote keeps at least one
    pair in train. Each quote needs at least 2 pairs (zero-shot) or 3 (others).
    """
    quote_ids = sorted(pairs_by_quote)
    zero_shot_ids = sorted(rng.sample(quote_ids, zero_shot))
    held_out = set(zero_shot_ids)
    train: list[Pair] = []
    valid: list[Pair] = []
    test: list[Pair] = []
    movable: list[Pair] = []
    for quote_id in quote_ids:
        pairs = list(pairs_by_quote[quote_id])
        rng.shuffle(pairs)
        if quote_id in held_out:
            # Alternate, starting with valid or test at random, so both get half of every zero-shot quote.
            first, second = (valid, test) if rng.random() < 0.5 else (test, valid)
            first.extend(pairs[0::2])
            second.extend(pairs[1::2])
            continue
        valid.append(pairs[0])
        test.append(pairs[1])
        train.append(pairs[2])
        movable.extend(pairs[3:])
    total = sum(len(pairs) for pairs in pairs_by_quote.values())
    rng.shuffle(movable)
    to_valid = max(0, round(total * valid_fraction) - len(valid))
    to_test = max(0, round(total * test_fraction) - len(test))
    valid.extend(movable[:to_valid])
    test.extend(movable[to_valid : to_valid + to_test])
    train.extend(movable[to_valid + to_test :])
    for part in (train, valid, test):
        rng.shuffle(part)
    return Split(train, valid, test, zero_shot_ids)
