"""Mine QuoteR-style datasets from any corpus and quote list (section 4 of the QuoteR paper)."""

from quoter.datasets.mining.config import BuildConfig
from quoter.datasets.mining.pipeline import OUTPUT_FILES, build_dataset
from quoter.datasets.mining.report import BuildReport

__all__ = ["OUTPUT_FILES", "BuildConfig", "BuildReport", "build_dataset"]
