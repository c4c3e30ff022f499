"""Find every sentence of every quote in a block of text at once, with an Aho-Corasick automaton."""

from __future__ import annotations

from dataclasses import dataclass

import ahocorasick

from quoter.datasets.mining.matching_text import MatchingForm, MatchText


@dataclass(frozen=True)
class QuoteSentence:
    """Sentence `index` of quote `quote_id`."""

    quote_id: int
    index: int


@dataclass(frozen=True)
class SentenceMatch:
    """A sentence pattern found in the normalised text, [start, end) without the framing separators."""

    pattern_id: int
    start: int
    end: int


class QuoteMatcher:
    """One automaton over the normalised sentences of all quotes.

    A sentence that several quotes share is one pattern that stands for all of them.
    """

    def __init__(self, form: MatchingForm, quote_sentences: list[list[str]]) -> None:
        """`quote_sentences[q]` are the sentences of quote q, in order."""
        self.form = form
        self.sentence_counts = [len(sentences) for sentences in quote_sentences]
        self.pattern_units: list[int] = []
        self.pattern_owners: list[list[QuoteSentence]] = []
        pattern_ids: dict[str, int] = {}
        for quote_id, sentences in enumerate(quote_sentences):
            for index, sentence in enumerate(sentences):
                pattern = form.pattern(sentence)
                if pattern not in pattern_ids:
                    pattern_ids[pattern] = len(pattern_ids)
                    self.pattern_units.append(form.units(form.normalise(sentence)))
                    self.pattern_owners.append([])
                self.pattern_owners[pattern_ids[pattern]].append(QuoteSentence(quote_id, index))
        self.pattern_lengths = [len(pattern) for pattern in pattern_ids]
        self.automaton = ahocorasick.Automaton()
        for pattern, pattern_id in pattern_ids.items():
            self.automaton.add_word(pattern, pattern_id)
        if pattern_ids:
            self.automaton.make_automaton()

    @property
    def pattern_count(self) -> int:
        """Number of distinct sentence patterns."""
        return len(self.pattern_lengths)

    def find(self, text: MatchText) -> list[SentenceMatch]:
        """Every occurrence of every pattern in `text`, overlapping ones included, by position."""
        if not self.pattern_lengths:
            return []
        separator = len(self.form.separator)
        matches = []
        for last, pattern_id in self.automaton.iter(text.normalised):
            start = last + 1 - self.pattern_lengths[pattern_id]
            matches.append(SentenceMatch(pattern_id, start + separator, last + 1 - separator))
        matches.sort(key=lambda match: (match.start, match.end))
        return matches
