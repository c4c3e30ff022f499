"""Split a quote into the words sememes are looked up for, with character offsets into the quote."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from quoter.languages import HAN, Language

ENGLISH_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*|[0-9]+")
CHINESE_CONTENT = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaffA-Za-z0-9]")


@dataclass(frozen=True)
class WordSpan:
    """A word and where it stands in the text: text[start:end] == word."""

    start: int
    end: int
    word: str


def english_words(text: str) -> list[WordSpan]:
    """Runs of letters (with inner apostrophes) or of digits."""
    return [WordSpan(match.start(), match.end(), match.group()) for match in ENGLISH_WORD.finditer(text)]


def chinese_words(text: str) -> list[WordSpan]:
    """jieba words that contain a Chinese character, letter or digit (punctuation and spaces are not words)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # jieba otherwise logs its dictionary loading on every first use
    return [WordSpan(start, end, word) for word, start, end in jieba.tokenize(text) if CHINESE_CONTENT.search(word)]


def segment(text: str, language: Language) -> list[WordSpan]:
    """The words of a text in the given language (jieba for both modern and classical Chinese)."""
    return english_words(text) if language is Language.EN else chinese_words(text)


def is_han(char: str) -> bool:
    """Whether a character is a Chinese character."""
    return HAN.fullmatch(char) is not None
