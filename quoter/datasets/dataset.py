"""A QuoteR dataset: context-quote pairs, the quote set they define, and their splits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quoter.errors import InputError
from quoter.quote_record import QuoteRecord

SPLIT_NAMES = ("train", "valid", "test")


@dataclass(frozen=True)
class Sample:
    """One context-quote pair: the quote that really stood between `left` and `right`."""

    left: str
    quote_id: int
    right: str
    line: int  # 1-based line of the source file, for messages


@dataclass
class QuoteDataset:
    """Samples of one file, its quote set (every distinct quote, in order of first appearance) and splits.

    `splits` maps a split name to a half-open range [start, end) of sample indices, or is None when
    the file came without split information. `details` gives quotes their sources and glosses (from a
    quote list given beside the data file); quotes it lacks have neither.
    """

    path: Path
    quotes: list[str]
    samples: list[Sample]
    splits: dict[str, tuple[int, int]] | None = None
    splits_source: str | None = None
    details: dict[str, QuoteRecord] = field(default_factory=dict)

    def quote_records(self) -> list[QuoteRecord]:
        """The quote set as records, in id order, with the sources and glosses `details` knows."""
        return [self.details.get(quote, QuoteRecord(quote)) for quote in self.quotes]

    def split(self, name: str) -> list[Sample]:
        """The samples of split `name` ('train', 'valid' or 'test')."""
        if self.splits is None:
            raise InputError(
                "no splits are known for this file: give a splits JSON (--splits) or an official part "
                "name (--part), or put a splits.json beside it",
                path=self.path,
            )
        if name not in self.splits:
            raise InputError(f"unknown split '{name}'; known: {', '.join(self.splits)}", path=self.path)
        start, end = self.splits[name]
        return self.samples[start:end]

    def quote_counts(self, split: str | None = None) -> np.ndarray:
        """Number of samples per quote id, in one split or (split=None) in the whole file."""
        samples = self.samples if split is None else self.split(split)
        counts = np.zeros(len(self.quotes), dtype=np.int64)
        for sample in samples:
            counts[sample.quote_id] += 1
        return counts

    def text_sample(self, max_contexts: int = 2000) -> list[str]:
        """Every quote and the contexts of up to `max_contexts` evenly spread samples (e.g. to tell the language)."""
        step = max(1, len(self.samples) // max_contexts)
        return [*self.quotes, *(f"{s.left} {s.right}" for s in self.samples[::step])]

    def zero_shot_quote_ids(self) -> set[int]:
        """Quotes that occur in valid or test but never in train (the paper's zero-shot quotes)."""
        train = self.quote_counts("train")
        held_out = self.quote_counts("valid") + self.quote_counts("test")
        return {int(q) for q in np.flatnonzero((held_out > 0) & (train == 0))}
