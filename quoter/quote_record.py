"""A quote and its source: kept free of heavy imports so the quote bank loads without torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuoteRecord:
    """A quote of the quote set and where it comes from (author, work; may be empty)."""

    text: str
    source: str = ""
