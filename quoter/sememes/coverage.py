"""How much of a set of quotes a lexicon reaches: the share of words and of tokens that receive sememes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quoter.sememes.alignment import SememeAnnotator, token_sememes

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast


@dataclass(frozen=True)
class Coverage:
    """Counts over a set of quotes; a word is covered if it, or one of its characters, has sememes."""

    quotes: int
    words: int
    words_covered: int
    words_by_characters: int
    tokens: int
    tokens_covered: int

    @property
    def word_share(self) -> float:
        return self.words_covered / self.words if self.words else 0.0

    @property
    def token_share(self) -> float:
        return self.tokens_covered / self.tokens if self.tokens else 0.0


def measure_coverage(
    quotes: Iterable[str], annotator: SememeAnnotator, tokenizer: PreTrainedTokenizerFast, max_length: int
) -> Coverage:
    """Annotate every quote and count covered words and covered tokens (special tokens excluded), tokenizing
    as the quote encoder does (truncated to `max_length`)."""
    n_quotes = words = words_covered = by_characters = tokens = tokens_covered = 0
    for quote in quotes:
        n_quotes += 1
        annotated = annotator.annotate(quote)
        words += len(annotated)
        words_covered += sum(1 for word in annotated if word.spans)
        by_characters += sum(1 for word in annotated if word.spans and word.by_characters)
        encoded = tokenizer(
            quote, truncation=True, max_length=max_length, return_offsets_mapping=True, return_special_tokens_mask=True
        )
        tokens += len(encoded["input_ids"]) - sum(encoded["special_tokens_mask"])
        spans = [span for word in annotated for span in word.spans]
        terms = token_sememes(encoded["offset_mapping"], encoded["special_tokens_mask"], spans)
        tokens_covered += len({term.token for term in terms})
    return Coverage(n_quotes, words, words_covered, by_characters, tokens, tokens_covered)


def render_coverage(coverage: Coverage) -> str:
    """A short human-readable report."""
    return (
        f"quotes: {coverage.quotes:,}\n"
        f"words with sememes: {coverage.words_covered:,} of {coverage.words:,} ({coverage.word_share:.1%}); "
        f"through the character fallback: {coverage.words_by_characters:,}\n"
        f"tokens with sememes: {coverage.tokens_covered:,} of {coverage.tokens:,} ({coverage.token_share:.1%})"
    )
