"""Tiny bundles for the serving tests: the tiny BERT of encoder_fixtures, a few quotes, no downloads."""

from __future__ import annotations

from pathlib import Path

from quoter.bundle import Bundle, QuoteRecord
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.languages import Language
from tests.encoder_fixtures import tiny_model, tiny_tokenizer

# A Host the app answers by default (a loopback server's); TestClient's own "testserver" would get 400.
LOOPBACK_URL = "http://127.0.0.1"
QUOTES = {
    Language.EN: [
        QuoteRecord("the cat sat on the mat", "Nursery"),
        QuoteRecord("the dog ran home", "Farm"),
        QuoteRecord("happy the dog", ""),
        QuoteRecord("unhappiness", "Essay"),
        QuoteRecord("a cat, a dog.", "List"),
    ],
    Language.ZH: [QuoteRecord("我们喜欢学习", "课本"), QuoteRecord("不亦乐乎", "")],
    Language.ZH_CLASSICAL: [QuoteRecord("学而时习之，不亦说乎", "《论语·学而》"), QuoteRecord("时不我与", "")],
}


def tiny_bundle(folder: Path, language: Language = Language.EN, seed: int = 0) -> Bundle:
    """A bundle of QUOTES[language] with tiny random encoders (tokenizer files written into `folder`)."""
    tokenizer = tiny_tokenizer(folder / "tokenizer")
    context = ContextEncoder(tiny_model(tokenizer, seed=seed), tokenizer, ContextEncoderConfig(max_length=32))
    quote = QuoteEncoder(tiny_model(tokenizer, seed=seed + 1), tokenizer, QuoteEncoderConfig(alpha=0.0))
    quotes = QUOTES[language]
    return Bundle(language, context, quote, quotes, quote.encode([q.text for q in quotes]), info={"model": "tiny"})
