"""The paper's Table 1 (pairs and quotes per split) and Table 4 (quotes per frequency range) views."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quoter.datasets.dataset import SPLIT_NAMES, QuoteDataset
from quoter.tables import markdown_table

# Upper bounds of the paper's Table 4 ranges; a last open range takes everything above.
FREQUENCY_EDGES = (10, 20, 50, 100)


@dataclass(frozen=True)
class DatasetStats:
    """Counts that describe a dataset the way the QuoteR paper does."""

    name: str
    pairs: int
    quotes: int
    split_pairs: dict[str, int] | None  # None when the dataset has no splits
    split_quotes: dict[str, int] | None
    zero_shot_quotes: int | None
    frequency_ranges: list[tuple[str, int]]  # ("[5,10]", number of quotes with 5..10 pairs), ...


def frequency_ranges(counts: np.ndarray) -> list[tuple[str, int]]:
    """Quotes per range of pair counts: [min,10], (10,20], (20,50], (50,100], (100,max], as in Table 4.

    Only ranges between the smallest and the largest count are listed.
    """
    counts = counts[counts > 0]
    if counts.size == 0:
        return []
    low, high = int(counts.min()), int(counts.max())
    bounds = [0, *FREQUENCY_EDGES]
    ranges = []
    for lower, upper in zip(bounds, [*FREQUENCY_EDGES, None]):
        upper_shown = high if upper is None else upper
        if lower >= high or upper_shown < low:
            continue
        opening = f"[{low}," if low > lower else f"({lower},"
        n = int(((counts > lower) & (counts <= upper_shown)).sum())
        ranges.append((f"{opening}{upper_shown}]", n))
    return ranges


def dataset_stats(dataset: QuoteDataset) -> DatasetStats:
    """Compute Table 1 and Table 4 counts of a dataset (split counts only when splits are known)."""
    split_pairs = split_quotes = zero_shot = None
    if dataset.splits is not None:
        split_pairs = {name: len(dataset.split(name)) for name in SPLIT_NAMES}
        split_quotes = {name: int((dataset.quote_counts(name) > 0).sum()) for name in SPLIT_NAMES}
        zero_shot = len(dataset.zero_shot_quote_ids())
    return DatasetStats(
        name=str(dataset.path),
        pairs=len(dataset.samples),
        quotes=len(dataset.quotes),
        split_pairs=split_pairs,
        split_quotes=split_quotes,
        zero_shot_quotes=zero_shot,
        frequency_ranges=frequency_ranges(dataset.quote_counts()),
    )


def render_stats(stats: DatasetStats) -> str:
    """Render the statistics as Markdown: pairs/quotes per split (m/n as in Table 1), then Table 4."""
    parts = [f"## {stats.name}", ""]
    if stats.split_pairs is not None and stats.split_quotes is not None:
        headers = ["", *SPLIT_NAMES, "total"]
        row = [f"{stats.split_pairs[s]:,}/{stats.split_quotes[s]:,}" for s in SPLIT_NAMES]
        parts += [
            markdown_table(headers, [["pairs/quotes", *row, f"{stats.pairs:,}/{stats.quotes:,}"]]),
            "",
            f"Zero-shot quotes (in valid or test, never in train): {stats.zero_shot_quotes:,}",
        ]
    else:
        parts.append(f"{stats.pairs:,} pairs, {stats.quotes:,} quotes (no splits given)")
    parts += [
        "",
        markdown_table(
            ["#pairs per quote", *(label for label, _ in stats.frequency_ranges)],
            [["#quotes", *(f"{n:,}" for _, n in stats.frequency_ranges)]],
        ),
    ]
    return "\n".join(parts)
