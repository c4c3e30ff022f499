"""Mine QuoteR-style datasets from any corpus and quote list (section 4 of the QuoteR paper)."""

from quoter.datasets.build.config import BuildConfig
from quoter.datasets.build.pipeline import OUTPUT_FILES, build_dataset
from quoter.datasets.build.report import BuildReport

__all__ = ["OUTPUT_FILES", "BuildConfig", "BuildReport", "build_dataset"]
