"""QuoteR datasets: samples, splits, readers and statistics."""

from quoter.datasets.dataset import SPLIT_NAMES, QuoteDataset, Sample
from quoter.datasets.readers import load_dataset, read_samples
from quoter.datasets.splits import OFFICIAL_PARTS, parse_splits
from quoter.datasets.statistics import DatasetStats, dataset_stats, render_stats

__all__ = [
    "OFFICIAL_PARTS",
    "SPLIT_NAMES",
    "DatasetStats",
    "QuoteDataset",
    "Sample",
    "dataset_stats",
    "load_dataset",
    "parse_splits",
    "read_samples",
    "render_stats",
]
