"""Read a word -> sememe lexicon file: a line with the word, then a line with its space-separated sememe names.

This is the format of thunlp's hownet.txt (Chinese words, sememes by their Chinese names)."""

from __future__ import annotations

from pathlib import Path

from quoter.errors import InputError
from quoter.sememes.lexicon import TableLexicon, table_from_names


def read_word_sememe_file(path: Path) -> TableLexicon:
    """Load a word-sememe file. Blank word lines (the file's first entry is one) carry no usable word and are
    skipped; a word may appear only once."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        raise InputError("lexicon file not found", path=path) from None
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 text ({error.reason} at byte {error.start})", path=path) from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 2:
        raise InputError("the file ends with a word line that has no sememe line", path=path, line=len(lines))
    words: dict[str, list[frozenset[str]]] = {}
    for index in range(0, len(lines), 2):
        word = lines[index].strip()
        if not word:
            continue
        if word in words:
            raise InputError(f"the word '{word}' appears a second time", path=path, line=index + 1)
        words[word] = [frozenset(lines[index + 1].split())]
    if not words:
        raise InputError("no words with sememes in the lexicon file", path=path)
    return table_from_names(words, f"word-sememe file {path}")
