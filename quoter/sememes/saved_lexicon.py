"""A sememe lexicon as one JSON file, so that a saved quote encoder carries the lexicon it was trained with and
reads nothing outside its folder:

    {"format", "version", "origin": where the lexicon came from, "names": [sememe names, in id order],
     "words": {word: [sememe ids]}, "lemmas": null | "simplemma" | {inflected form: [lemmas]}}

`words` is the lexicon as the quote encoder looks words up (a word file or OpenHowNet after the consensus
of senses; English words already bridged through CC-CEDICT); `lemmas` is how English words are lemmatised
before a second look-up (null for Chinese)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quoter.errors import InputError, QuoterError
from quoter.json_files import read_json_file
from quoter.sememes.english import EnglishLexicon, LemmaTableLemmatizer, Lemmatizer, SimplemmaLemmatizer
from quoter.sememes.lexicon import SememeLexicon, TableLexicon

LEXICON_FORMAT = "quoter-sememe-lexicon"
LEXICON_VERSION = 1
SIMPLEMMA = "simplemma"


def _lexicon_json(lexicon: SememeLexicon) -> dict[str, Any]:
    if isinstance(lexicon, EnglishLexicon):
        table, lemmas = lexicon.table, _lemmatizer_to_json(lexicon.lemmatizer)
    elif isinstance(lexicon, TableLexicon):
        table, lemmas = lexicon, None
    else:
        raise QuoterError(f"a {type(lexicon).__name__} cannot be saved; only word tables can")
    words = {word: sorted(ids) for word, ids in table.table.items()}
    return {
        "format": LEXICON_FORMAT,
        "version": LEXICON_VERSION,
        "origin": table.description,
        "names": list(table.names),
        "words": words,
        "lemmas": lemmas,
    }


def _lemmatizer_to_json(lemmatizer: Lemmatizer) -> str | dict[str, list[str]]:
    if isinstance(lemmatizer, SimplemmaLemmatizer):
        return SIMPLEMMA
    if isinstance(lemmatizer, LemmaTableLemmatizer):
        return lemmatizer.table
    raise QuoterError(f"a {type(lemmatizer).__name__} cannot be saved with the lexicon")


def save_lexicon(lexicon: SememeLexicon, path: Path) -> None:
    """Write the lexicon to `path` (inside a folder being written atomically)."""
    path.write_text(json.dumps(_lexicon_json(lexicon), ensure_ascii=False, separators=(",", ":")), "utf-8")


def load_saved_lexicon(path: Path) -> SememeLexicon:
    """Read a lexicon written by `save_lexicon`; anything else is a one-line InputError naming the file."""
    data = read_json_file(path, "the saved sememe lexicon is missing")
    if not isinstance(data, dict) or data.get("format") != LEXICON_FORMAT or data.get("version") != LEXICON_VERSION:
        raise InputError(f"not a saved sememe lexicon ('{LEXICON_FORMAT}' version {LEXICON_VERSION})", path=path)
    try:
        names = tuple(str(name) for name in data["names"])
        table = {str(word): frozenset(int(i) for i in ids) for word, ids in data["words"].items()}
        lemmas = data["lemmas"]
        origin = str(data["origin"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError('expected "origin", "names", "words" and "lemmas"', path=path) from None
    if any(not 0 <= i < len(names) for ids in table.values() for i in ids):
        raise InputError("a word has a sememe id beyond the names", path=path)
    words = TableLexicon(names, table, origin)
    if lemmas is None:
        return words
    if lemmas == SIMPLEMMA:
        return EnglishLexicon(words, SimplemmaLemmatizer())
    if not isinstance(lemmas, dict):
        raise InputError('"lemmas" must be null, "simplemma" or a table of forms', path=path)
    return EnglishLexicon(words, LemmaTableLemmatizer(lemmas))
