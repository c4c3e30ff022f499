"""The real usage file of a bank: `left<TAB>quote<TAB>right<TAB>file<TAB>line<TAB>rule<TAB>part`, one example a
line, the quote exactly as in the bank, and a fixed part for each example."""

from __future__ import annotations

import hashlib

from quoter.datasets.mining.usage import UsageExample
from quoter.quote_record import QuoteRecord

HEADER = ("left", "quote", "right", "file", "line", "rule", "part")
PARTS = ("held-back", "fit")
# About a quarter of the examples are held back: those whose hash starts with a byte below this.
HELD_BACK_BELOW = 64


def part(quote: str, file: str, line: int) -> str:
    """`held-back` (used only to measure, never to fit) or `fit`: held back when the first byte of
    sha256(f"{quote}\\t{file}\\t{line}") is below HELD_BACK_BELOW, so an example's part never changes."""
    digest = hashlib.sha256(f"{quote}\t{file}\t{line}".encode()).digest()
    return PARTS[0] if digest[0] < HELD_BACK_BELOW else PARTS[1]


def render_usage_file(examples: list[UsageExample], quotes: list[QuoteRecord]) -> str:
    """The file's text: the header, then one line per example in the order given."""
    lines = ["\t".join(HEADER)]
    for example in examples:
        quote = quotes[example.quote_id].text
        fields = (example.left, quote, example.right, example.file, str(example.line), example.rule)
        lines.append("\t".join((*fields, part(quote, example.file, example.line))))
    return "\n".join(lines) + "\n"
