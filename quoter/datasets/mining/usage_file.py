"""The real usage file of a bank: `left<TAB>quote<TAB>right<TAB>file<TAB>line<TAB>rule<TAB>part`, one example a
line, the quote exactly as in the bank, and a fixed part for each example, the same for every example of its
source."""

from __future__ import annotations

import hashlib

from quoter.datasets.mining.usage import UsageExample
from quoter.quote_record import QuoteRecord

HEADER = ("left", "quote", "right", "file", "line", "rule", "part")
PARTS = ("held-back", "fit")
# About a quarter of the sources are held back: those whose hash starts with a byte below this.
HELD_BACK_BELOW = 64
# A file of records, one a line (the idiom dictionary): each record is a source of its own.
RECORD_FILE_SUFFIX = ".jsonl"


def source(file: str, line: int) -> str:
    """What an example's context comes from, held back or fitted on whole: a book (a corpus file) whole, and a
    record of a file of records (an idiom's entry in the dictionary) on its own. Lines of one book on both sides
    would flatter every method that matches known contexts, as new prose never would."""
    return f"{file}:{line}" if file.endswith(RECORD_FILE_SUFFIX) else file


def part(file: str, line: int) -> str:
    """`held-back` (used only to measure, never to fit) or `fit`: held back when the first byte of the
    sha256 of the example's source (see `source`) is below HELD_BACK_BELOW, so that a source's examples are all
    on one side, and a source's part never changes."""
    digest = hashlib.sha256(source(file, line).encode()).digest()
    return PARTS[0] if digest[0] < HELD_BACK_BELOW else PARTS[1]


def render_usage_file(examples: list[UsageExample], quotes: list[QuoteRecord]) -> str:
    """The file's text: the header, then one line per example in the order given."""
    lines = ["\t".join(HEADER)]
    for example in examples:
        quote = quotes[example.quote_id].text
        fields = (example.left, quote, example.right, example.file, str(example.line), example.rule)
        lines.append("\t".join((*fields, part(example.file, example.line))))
    return "\n".join(lines) + "\n"
