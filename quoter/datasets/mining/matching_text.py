"""The text the automaton searches: a normalised copy of the original that can be mapped back to it.

English is matched on lower-cased words joined by single spaces, so line breaks, case, punctuation and
curly apostrophes do not hide a quotation; Chinese is matched on its characters with white space and
punctuation removed. Contexts are always cut from the original text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# Words are runs of letters and digits (not underscores: Gutenberg marks _italics_ with them), with
# inner apostrophes, so "don't" is one word.
ENGLISH_WORDS = re.compile(r"([^\W_]+(?:'[^\W_]+)*)")
# Chinese keeps every letter or digit (Han characters included) and drops the rest.
CHINESE_RUNS = re.compile(r"([^\W_]+)")
CURLY_APOSTROPHES = ("’", "‘", "ʼ")


@dataclass(frozen=True)
class MatchText:
    """Normalised text with the start of each of its segments in the normalised and the original text."""

    normalised: str
    normalised_starts: np.ndarray
    original_starts: np.ndarray

    def original_position(self, position: int) -> int:
        """The original offset of the character at normalised offset `position` (not a separator)."""
        segment = int(np.searchsorted(self.normalised_starts, position, side="right")) - 1
        return int(self.original_starts[segment]) + position - int(self.normalised_starts[segment])

    def normalised_position(self, original: int) -> int:
        """The normalised offset of the first segment that starts at or after original offset `original`."""
        segment = int(np.searchsorted(self.original_starts, original, side="left"))
        return int(self.normalised_starts[segment]) if segment < len(self.normalised_starts) else len(self.normalised)


def comparable(text: str) -> str:
    """Lower-case `text` and straighten apostrophes without changing its length, so offsets stay valid."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters ('İ') grow when lower-cased; keep those as they are
        lowered = "".join(low if len(low := char.lower()) == 1 else char for char in text)
    for apostrophe in CURLY_APOSTROPHES:
        lowered = lowered.replace(apostrophe, "'")
    return lowered


class MatchingForm:
    """How one language is normalised for matching: the segments kept and what joins them."""

    def __init__(self, chinese: bool) -> None:
        self.segments = CHINESE_RUNS if chinese else ENGLISH_WORDS
        # English words are joined and framed by spaces so that a pattern " a b " only matches whole words.
        self.separator = "" if chinese else " "

    def normalise(self, text: str) -> str:
        """The normalised form of a short text such as a quote sentence ('' when nothing is left)."""
        segments = self.segments.findall(comparable(text))
        return self.separator.join(segments)

    def pattern(self, text: str) -> str:
        """What the automaton looks for: the normalised text framed by separators ('' when nothing is left)."""
        normalised = self.normalise(text)
        return f"{self.separator}{normalised}{self.separator}" if normalised else ""

    def searchable(self, text: str, sentences: list[str]) -> list[str]:
        """The `sentences` of `text` that have something to match ("--" has not; it can be neither found nor
        missed), or `text` itself when none has."""
        return [sentence for sentence in sentences if self.normalise(sentence)] or [text]

    def units(self, normalised: str) -> int:
        """Length of a normalised text in words (English) or characters (Chinese)."""
        return len(normalised.split(" ")) if self.separator else len(normalised)

    def match_text(self, text: str) -> MatchText:
        """Normalise a block of corpus text and keep the offsets that map matches back to it."""
        # split() with a capturing group alternates separators and segments, all in C; the offsets come from
        # the lengths of the pieces, summed by numpy rather than in a Python loop.
        pieces = self.segments.split(comparable(text))
        segments = pieces[1::2]
        piece_ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
        original_starts = piece_ends[0::2][: len(segments)]
        step = np.fromiter(map(len, segments), dtype=np.int64, count=len(segments)) + len(self.separator)
        normalised_starts = np.cumsum(step) - step + len(self.separator)
        normalised = f"{self.separator}{self.separator.join(segments)}{self.separator}"
        return MatchText(normalised, normalised_starts, original_starts)
