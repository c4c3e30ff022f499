"""The one interface every sememe source offers: a word's set of sememe ids, and the names of those ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar


class SememeLexicon(Protocol):
    """Word -> sememe ids. Ids index `names`; an unknown word has the empty set."""

    names: tuple[str, ...]
    description: str

    def sememes(self, word: str) -> frozenset[int]:
        """The sememe ids of a word (empty when the lexicon does not know it)."""
        ...


@dataclass(frozen=True)
class TableLexicon:
    """A lexicon held as a table from exact word forms to sememe ids."""

    names: tuple[str, ...]
    table: Mapping[str, frozenset[int]] = field(repr=False)
    description: str

    def sememes(self, word: str) -> frozenset[int]:
        """The sememe ids of exactly this word form."""
        return self.table.get(word, frozenset())

    def __len__(self) -> int:
        return len(self.table)


def table_from_names(word_sememes: Mapping[str, Sequence[frozenset[str]]], description: str) -> TableLexicon:
    """Build a TableLexicon from word -> sense sememe-name sets (best sense first), ids in name order.

    A word with several senses gets their consensus (see `consensus`) rather than the union of all senses,
    which would mix unrelated meanings."""
    names = tuple(sorted({name for senses in word_sememes.values() for sense in senses for name in sense}))
    ids = {name: index for index, name in enumerate(names)}
    table = {}
    for word, senses in word_sememes.items():
        chosen = consensus([sense for sense in senses if sense])
        if chosen:
            table[word] = frozenset(ids[name] for name in chosen)
    return TableLexicon(names, table, description)


T = TypeVar("T")


def consensus(senses: Sequence[frozenset[T]]) -> frozenset[T]:
    """The sememes shared by more than half of the senses, else the first (best-ranked) sense's sememes."""
    if not senses:
        return frozenset()
    counts = Counter(name for sense in senses for name in sense)
    shared = frozenset(name for name, count in counts.items() if 2 * count > len(senses))
    return shared or senses[0]
