"""Which sememes each token of a quote receives: words from the segmenter, sememes from the lexicon (with a
character fallback for Chinese), tokens matched to words through the fast tokenizer's offset mapping."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from quoter.languages import Language
from quoter.sememes.lexicon import SememeLexicon
from quoter.sememes.segmentation import WordSpan, is_han, segment


@dataclass(frozen=True)
class SememeSpan:
    """A stretch of text (a word, or one character of a word the lexicon lacks) and its sememe ids."""

    start: int
    end: int
    sememes: frozenset[int]


@dataclass(frozen=True)
class AnnotatedWord:
    """A word and the spans that carry its sememes: the whole word, its characters (fallback), or none."""

    word: WordSpan
    spans: tuple[SememeSpan, ...]
    by_characters: bool


@dataclass(frozen=True)
class TokenSememe:
    """One term of Eq. 6: token `token` gets `weight` times the embedding of sememe `sememe`."""

    token: int
    sememe: int
    weight: float


class SememeAnnotator:
    """Annotates texts of one language with the sememes of a lexicon."""

    def __init__(self, lexicon: SememeLexicon, language: Language) -> None:
        self.lexicon = lexicon
        self.language = language

    def annotate(self, text: str) -> list[AnnotatedWord]:
        """Every word of the text with its sememe spans. A Chinese word the lexicon lacks falls back to its
        characters' own sememes (classical Chinese is mostly one character a word)."""
        annotated = []
        for word in segment(text, self.language):
            sememes = self.lexicon.sememes(word.word)
            if sememes:
                annotated.append(AnnotatedWord(word, (SememeSpan(word.start, word.end, sememes),), False))
            elif self.language is not Language.EN and len(word.word) > 1:
                annotated.append(AnnotatedWord(word, self._character_spans(word), True))
            else:
                annotated.append(AnnotatedWord(word, (), False))
        return annotated

    def _character_spans(self, word: WordSpan) -> tuple[SememeSpan, ...]:
        spans = []
        for offset, char in enumerate(word.word):
            sememes = self.lexicon.sememes(char) if is_han(char) else frozenset()
            if sememes:
                spans.append(SememeSpan(word.start + offset, word.start + offset + 1, sememes))
        return tuple(spans)

    def spans(self, text: str) -> list[SememeSpan]:
        """The sememe-carrying spans of a text, in text order."""
        return [span for word in self.annotate(text) for span in word.spans]


def token_sememes(
    offsets: Sequence[tuple[int, int]], special: Sequence[int], spans: Sequence[SememeSpan]
) -> list[TokenSememe]:
    """Eq. 6 as weights: each token overlapping a span gets the mean of that span's sememes.

    `offsets` is the tokenizer's offset mapping and `special` its special-tokens mask. A token that overlaps
    several spans (a sentencepiece covering two words) gets the average of their means, so every token's
    sememe weights add up to 1 whatever the tokenizer."""
    starts = [span.start for span in spans]
    terms = []
    for token, ((start, end), is_special) in enumerate(zip(offsets, special)):
        if is_special or end <= start:
            continue
        # Spans are sorted and disjoint: candidates are those starting before the token ends.
        overlapping = [span for span in spans[: bisect_right(starts, end - 1)] if span.end > start]
        for span in overlapping:
            weight = 1.0 / (len(span.sememes) * len(overlapping))
            terms.extend(TokenSememe(token, sememe, weight) for sememe in sorted(span.sememes))
    return terms
