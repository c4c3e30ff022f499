"""Words for lexical matching: English words, jieba words for modern Chinese, characters for classical."""

from __future__ import annotations

import logging
import re
from functools import cache

import jieba
from bm25s.stopwords import STOPWORDS_EN

from quoter.languages import HAN, Language

ENGLISH_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")
# A token worth matching has a letter, digit or Chinese character; punctuation and spaces are dropped.
CONTENT = re.compile(r"\w")
ENGLISH_STOPWORDS = frozenset(STOPWORDS_EN)


@cache
def _jieba() -> jieba.Tokenizer:
    jieba.setLogLevel(logging.WARNING)  # jieba otherwise logs its dictionary loading on every start
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer


def lexical_tokens(text: str, lang: Language) -> list[str]:
    """Split text into the tokens that BM25 and CRM match on, for the given language."""
    if lang is Language.EN:
        return [w for w in ENGLISH_WORD.findall(text.lower()) if w not in ENGLISH_STOPWORDS]
    if lang is Language.ZH:
        return [w for w in _jieba().lcut(text.lower()) if CONTENT.search(w)]
    # Classical Chinese is mostly one character a word: each Han character, and runs of other word characters.
    return [t for t in re.findall(rf"{HAN.pattern}|[^\W\u3400-\u9fff]+", text.lower()) if CONTENT.search(t)]
