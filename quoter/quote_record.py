"""A quote, its source and its gloss: kept free of heavy imports so the quote bank loads without torch."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

# What a reader sees of a text: letters, numbers, punctuation and symbols (Unicode categories L, N, P, S).
# White space, control and format characters (the zero-width ones, U+200B..U+200D, U+2060, U+FEFF) and
# combining marks show nothing on their own.
VISIBLE_CATEGORIES = frozenset("LNPS")
# The same rule as a JSON Schema pattern (ECMA-262): the text has one such character somewhere. The CJK
# ideographs (U+3400-U+4DBF, U+4E00-U+9FFF), CJK punctuation (U+3001-U+3029) and full-width forms
# (U+FF01-U+FF60) are in those categories already; they are named too because tools that translate \p{...}
# for engines without it (Schemathesis) keep to Latin letters and would take a Chinese quote for invisible.
VISIBLE_TEXT_PATTERN = r"[\p{L}\p{N}\p{P}\p{S}\u3400-\u4DBF\u4E00-\u9FFF\u3001-\u3029\uFF01-\uFF60]"


def has_visible_text(text: str) -> bool:
    """Whether `text` shows anything: a letter, number, punctuation mark or symbol, not only white space,
    control, zero-width or combining characters. A quote without one is no quote."""
    return any(unicodedata.category(char)[0] in VISIBLE_CATEGORIES for char in text)


@dataclass(frozen=True)
class QuoteRecord:
    """A quote of the quote set, where it comes from (author, work; may be empty) and its gloss: a short
    explanation of its meaning or a modern rendering (may be empty), which the quote encoder can read."""

    text: str
    source: str = ""
    gloss: str = ""

    @property
    def description(self) -> str:
        """What the quote encoder reads after the quote when glosses are on: the gloss, then the source (a
        work or author also says what a quote is about, and writers often name it)."""
        return " ".join(part for part in (self.gloss, self.source) if part)

    def to_json(self) -> dict[str, str]:
        """`{"quote", "source"}`, plus `"gloss"` when there is one."""
        item = {"quote": self.text, "source": self.source}
        if self.gloss:
            item["gloss"] = self.gloss
        return item

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> QuoteRecord:
        """Read `to_json`'s output; raises KeyError without "quote", TypeError when `item` is no mapping."""
        return cls(str(item["quote"]), str(item.get("source", "")), str(item.get("gloss", "")))
