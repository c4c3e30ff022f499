"""Stream corpus files as blocks of text: Project Gutenberg boilerplate removed, long files cut with overlap."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

from quoter.errors import InputError
from quoter.text_lines import decoded_lines

CORPUS_SUFFIX = ".txt"
# The start marker sits within the first few hundred lines, after the licence "small print" of old files.
GUTENBERG_HEADER_LINES = 800
GUTENBERG_START = re.compile(
    r"^\s*(\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG|\*END\*THE SMALL PRINT)", re.IGNORECASE
)
GUTENBERG_END = re.compile(
    r"^\s*(\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.IGNORECASE
)
# Credit paragraphs right after the start marker ("Produced by ...") are not part of the book.
GUTENBERG_CREDIT = re.compile(
    r"^\s*(Produced by|E-?text prepared by|Transcribed from|This e-?text was prepared|Prepared by)", re.IGNORECASE
)
# Overlap between blocks of one file, beyond twice the longest quote: ample for 40 words or 50 characters.
BLOCK_MARGIN_CHARS = 10_000


@dataclass(frozen=True)
class CorpusFile:
    """A corpus document: one file, numbered in reading order."""

    document_id: int
    path: Path
    size: int


@dataclass(frozen=True)
class Block:
    """A piece of a document. Occurrences are taken from those that start in [emit_start, emit_end);
    the text around that range is the previous and next blocks' overlap, there for contexts only."""

    document: CorpusFile
    text: str
    emit_start: int
    emit_end: int
    bytes_read: int  # new bytes of the file in this block, for the progress bar
    first_line: int  # the file's 1-based number of the line that holds the text's first character

    def line_at(self, offset: int) -> int:
        """The file's 1-based number of the line that holds the text's character at `offset`."""
        # The text's lines follow each other in the file: boilerplate is cut only before and after the body.
        return self.first_line + self.text.count("\n", 0, offset)


def block_margin(longest_quote: int) -> int:
    """The overlap of consecutive blocks (`read_blocks`' margin) that holds a quote of `longest_quote` characters
    and its contexts."""
    return BLOCK_MARGIN_CHARS + 2 * longest_quote


def corpus_files(paths: Iterable[Path]) -> list[CorpusFile]:
    """The corpus documents: given files, and the .txt files under given folders, in sorted order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob(f"*{CORPUS_SUFFIX}") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise InputError("corpus path not found", path=path)
    if not found:
        raise InputError(
            f"no corpus files: the corpus folders hold no {CORPUS_SUFFIX} files", path=", ".join(map(str, paths))
        )
    unique = list(dict.fromkeys(found))
    return [CorpusFile(number, path, path.stat().st_size) for number, path in enumerate(unique)]


def without_gutenberg_boilerplate(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Drop a Project Gutenberg header (up to its start marker) and footer (from its end marker on).

    Files without a start marker in their first lines are passed through from the start.
    """
    head = list(islice(lines, GUTENBERG_HEADER_LINES))
    starts = [index for index, (_, text) in enumerate(head) if GUTENBERG_START.match(text)]
    body: Iterator[tuple[int, str]] = iter(head)
    if starts:
        rest = head[starts[-1] :]
        # A long title wraps the marker onto further lines; the marker ends with "***".
        marker_lines = next((i for i, (_, text) in enumerate(rest[:4]) if text.rstrip().endswith("***")), 0)
        body = skip_credit_paragraphs(rest[marker_lines + 1 :])
    for number, text in chain(body, lines):
        if GUTENBERG_END.match(text):
            return
        yield number, text


def skip_credit_paragraphs(lines: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Lines after the start marker, without up to two leading credit paragraphs."""
    position, skipped = 0, 0
    while skipped < 2:
        while position < len(lines) and not lines[position][1].strip():
            position += 1
        if position >= len(lines) or not GUTENBERG_CREDIT.match(lines[position][1]):
            break
        while position < len(lines) and lines[position][1].strip():
            position += 1
        skipped += 1
    return iter(lines[position:])


def read_blocks(
    document: CorpusFile,
    block_chars: int,
    margin_chars: int,
    strip_gutenberg: bool,
    convert: Callable[[str], str] | None = None,
) -> Iterator[Block]:
    """Yield a document as blocks of about `block_chars` characters, cut at line ends, each line passed
    through `convert` if given (before the offsets are taken, so they stay valid).

    Consecutive blocks overlap: each block's emit range ends at the last line start at least `margin_chars`
    before its end, and the next block repeats `margin_chars` before that point as left context. So every
    occurrence is taken exactly once, and with its full contexts if the margin holds a quote and a context.
    """
    lines = decoded_lines(document.path)
    if strip_gutenberg:
        lines = without_gutenberg_boilerplate(lines)
    carried = ""  # the previous block's overlap
    emit_start = 0
    first_line = 1  # of the block being gathered: the overlap's first line, else the first pending one
    pending: list[str] = []
    pending_chars = pending_bytes = 0
    for number, line in lines:
        if not carried and not pending:
            first_line = number
        pending_bytes += (len(line) if line.isascii() else len(line.encode("utf-8"))) + 1
        if convert is not None:
            line = convert(line)
        pending.append(line)
        pending_chars += len(line) + 1
        if pending_chars < block_chars:
            continue
        text = carried + "\n".join(pending) + "\n"
        # The emit range ends at a line start, where no word or run of Chinese characters can be cut.
        emit_end = max(emit_start, text.rfind("\n", emit_start, max(emit_start, len(text) - margin_chars)) + 1)
        block = Block(document, text, emit_start, emit_end, pending_bytes, first_line)
        yield block
        overlap_start = max(0, emit_end - margin_chars)
        carried, emit_start = text[overlap_start:], emit_end - overlap_start
        first_line = block.line_at(overlap_start)
        pending, pending_chars, pending_bytes = [], 0, 0
    text = carried + "\n".join(pending) + ("\n" if pending else "")
    if text.strip():
        yield Block(document, text, emit_start, len(text), pending_bytes, first_line)
