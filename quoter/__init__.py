"""Quoter: recommend the quote that fits a gap in a piece of writing (the QuoteR method)."""

__version__ = "0.1.0"
