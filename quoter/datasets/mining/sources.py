"""Self-citation: a quote found inside its own source work is not a citation of it.

A quote list row names its source (`source` column); a sources file marks corpus files with the works or
authors they are, one `file<TAB>source` row each. A quote is not counted in a file when one of the file's
source names occurs in the quote's source: "Oscar Wilde" marks Wilde's books, so the aphorism with source
"Oscar Wilde, Miscellaneous Aphorisms (1911)" is not taken from them. Latin names must match as whole
words, Chinese names (no word boundaries) anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

from quoter.datasets.mining.quote_lists import collapse_whitespace
from quoter.errors import InputError
from quoter.text_lines import decoded_lines

SOURCE_COLUMNS = ("file", "source")
WORD_CHAR = re.compile(r"\w", re.ASCII)


def read_sources(path: Path) -> dict[str, list[str]]:
    """Read a sources file: corpus file name -> the source names it is marked with."""
    lines = decoded_lines(path)
    header = next(lines, None)
    if header is None or header[1].split("\t") != list(SOURCE_COLUMNS):
        found = "nothing" if header is None else repr(header[1])
        raise InputError(f"expected the header 'file<TAB>source', found {found}", path=path, line=1)
    sources: dict[str, list[str]] = {}
    for number, line in lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise InputError("expected a file name and a source name, tab-separated", path=path, line=number)
        sources.setdefault(Path(fields[0].strip()).name, []).append(collapse_whitespace(fields[1]))
    return sources


def source_pattern(name: str) -> re.Pattern[str]:
    """A case-insensitive pattern for a source name; word boundaries only where the name has Latin ends."""
    before = r"(?<!\w)" if WORD_CHAR.match(name[0]) else ""
    after = r"(?!\w)" if WORD_CHAR.match(name[-1]) else ""
    return re.compile(before + re.escape(name) + after, re.IGNORECASE)


class SelfCitations:
    """Which quotes must not be counted in which corpus file."""

    def __init__(self, file_sources: dict[str, list[str]], quote_sources: list[str]) -> None:
        self.file_sources = file_sources
        self.quote_sources = quote_sources
        self._by_name: dict[str, frozenset[int]] = {}

    def excluded_quotes(self, path: Path) -> frozenset[int]:
        """Quote ids whose source is one of the sources `path` is marked with."""
        excluded: set[int] = set()
        for name in self.file_sources.get(path.name, []):
            if name not in self._by_name:
                pattern = source_pattern(name)
                self._by_name[name] = frozenset(
                    quote_id for quote_id, source in enumerate(self.quote_sources) if source and pattern.search(source)
                )
            excluded |= self._by_name[name]
        return frozenset(excluded)

    def marked_files(self) -> list[str]:
        """The corpus file names the sources file marks."""
        return list(self.file_sources)
