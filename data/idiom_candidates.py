"""Write `candidates.jsonl` beside a built modern Chinese dataset: 7 answer choices for every test pair.

Quote recommendation ranks every known quote; the ChID idiom benchmark (Zheng et al., ACL 2019) asks a
multiple-choice question instead: which of 7 candidate idioms fills the blank? This script makes such a
candidate file for the test split of `data/built/zh-modern`, so that a method can also be scored as a
7-way choice. As in ChID, the candidates are meant to be hard to tell apart: idioms that look like the
answer and idioms that mean something close to it, so that neither the characters nor the topic alone
give the answer away.

For each test line N of DIR/data.txt (0-based, in order) it writes one JSON line
`{"line": N, "candidates": [7 strings]}`: the gold quote (column 2 of line N) and 6 distractors in a
random order seeded by the seed and N. The distractors come from the pool of all idioms of the idiom
dictionary plus the set's own quotes:

* 3 of similar form: pool entries of the gold's length that share the most distinct letters (Han
  characters) with it. When fewer qualify, entries of the nearest lengths follow.
* 3 of similar meaning: the entries whose explanation is nearest to the gold's explanation by BM25
  (bm25s) over jieba words. Entries without an explanation (proverbs) are indexed by their own text,
  and a gold without an explanation queries with its own text.

Ties are broken by one seeded shuffle of the pool. A distractor is never the gold, never chosen twice,
and never a synonym or variant of the gold, which would be a second right answer: not the same
characters in another order, not an entry with the gold's explanation (variants often share one), not
one whose explanation names the other (`同X`), and not one whose meaning and the gold's are each
other's near-best BM25 match (束手无措 for 束手无策, 烘堂大笑 for 哄堂大笑). Near-synonyms below that
threshold stay: they are what makes the choice hard. No two distractors are synonyms of each other
either (袒裼裸裎 and 裸裎袒裼 would be ruled out together). The same gold always gets the same 6
distractors; only their order changes from line to line.

Usage: python data/idiom_candidates.py DIR --idioms idioms.jsonl [--seed 13]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bm25s
import jieba
import numpy as np
from idiom_dictionary import read_idioms

from quoter.atomic_files import write_text_atomic
from quoter.datasets import load_dataset

SEED = 13
FORM_DISTRACTORS = 3
MEANING_DISTRACTORS = 3
TOP_K = 256  # BM25 hits sorted first; the rest only if these run out of eligible entries
SYNONYM_RATIO = 0.6  # meanings this close both ways are synonyms (see CandidateChooser.synonym)
WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Entry:
    """A pool entry: a quote text and its dictionary explanation (empty for quotes without one)."""

    text: str
    explanation: str


def read_pool(idioms_path: Path, set_quotes: list[str]) -> list[Entry]:
    """All idioms of the dictionary (file order, first record of a text wins), then the set's other quotes."""
    entries = {text: Entry(text, idiom.explanation) for text, idiom in read_idioms(idioms_path).items()}
    for quote in set_quotes:
        entries.setdefault(quote, Entry(quote, ""))
    return list(entries.values())


def read_lines(data_dir: Path) -> tuple[list[str], list[int]]:
    """The quote of every line of DIR/data.txt and the 0-based lines of its test split."""
    dataset = load_dataset(data_dir / "data.txt")
    quotes = [dataset.quotes[sample.quote_id] for sample in dataset.samples]
    return quotes, [sample.line - 1 for sample in dataset.split("test")]


def words(text: str) -> list[str]:
    """jieba words of a text, punctuation left out."""
    return [word for word in jieba.lcut(text) if WORD.search(word)]


def letters(text: str) -> set[str]:
    """The distinct letters (Han characters, Latin letters, digits) of a text."""
    return {char for char in text if char.isalnum()}


class CandidateChooser:
    """Chooses the form and meaning distractors of a gold quote from one pool, with indexes built once."""

    def __init__(self, pool: list[Entry], seed: int) -> None:
        self.pool = pool
        self.index_of = {entry.text: i for i, entry in enumerate(pool)}
        order = list(range(len(pool)))
        random.Random(seed).shuffle(order)
        self.rank = np.empty(len(pool), dtype=np.int64)  # tie-break: position in one seeded shuffle
        self.rank[order] = np.arange(len(pool))
        self.lengths = np.array([len(entry.text) for entry in pool], dtype=np.int64)
        postings: dict[str, list[int]] = {}
        for i, entry in enumerate(pool):
            for char in letters(entry.text):
                postings.setdefault(char, []).append(i)
        self.postings = {char: np.array(ids, dtype=np.int64) for char, ids in postings.items()}
        # What an entry means: its explanation, or its own text where it has none (proverbs).
        self.meanings = [words(entry.explanation or entry.text) for entry in pool]
        self.bm25 = bm25s.BM25()
        self.bm25.index(self.meanings, show_progress=False)

    def scores(self, i: int) -> np.ndarray:
        """BM25 scores of every pool entry for the meaning of entry i as the query."""
        tokens = [word for word in self.meanings[i] if word in self.bm25.vocab_dict]
        return self.bm25.get_scores(tokens) if tokens else np.zeros(len(self.pool), dtype=np.float32)

    def distractors(self, gold: str) -> list[str]:
        """3 form distractors, then 3 meaning distractors of a gold quote (which must be in the pool)."""
        g = self.index_of[gold]
        scores = {g: self.scores(g)}
        chosen: list[int] = []

        def eligible(i: int) -> bool:
            """Neither the gold nor chosen, nor a synonym of the gold or of a chosen distractor."""
            if i == g or i in chosen:
                return False
            for c in (g, *chosen):
                if c not in scores:
                    scores[c] = self.scores(c)
                if self.synonym(c, i, scores[c]):
                    return False
            return True

        groups = ((self.by_form(gold), FORM_DISTRACTORS), (self.by_meaning(scores[g]), MEANING_DISTRACTORS))
        for ranked, count in groups:
            wanted = len(chosen) + count
            for i in ranked:
                if eligible(i):
                    chosen.append(i)
                    if len(chosen) == wanted:
                        break
        return [self.pool[i].text for i in chosen]

    def synonym(self, g: int, i: int, scores: np.ndarray) -> bool:
        """Whether entry i could replace entry g (`scores`: BM25 scores for g's meaning as the query).

        True for the same letters in another order (耀武扬威, 扬威耀武), the same explanation, an
        explanation that names the other (`同X`), and meanings that are each other's near-best BM25 match
        (each scores at least SYNONYM_RATIO of what the other's meaning scores against itself).
        """
        known, entry = self.pool[g], self.pool[i]
        if sorted(known.text) == sorted(entry.text):
            return True
        if known.explanation and entry.explanation == known.explanation:
            return True
        if entry.text in known.explanation or known.text in entry.explanation:
            return True
        if scores[g] <= 0 or scores[i] < SYNONYM_RATIO * scores[g]:
            return False
        reverse = self.scores(i)
        return bool(reverse[g] >= SYNONYM_RATIO * reverse[i])

    def by_form(self, gold: str) -> Iterator[int]:
        """Pool ids of the gold's length by shared letters (most first); then every entry by nearest length."""
        shared = np.zeros(len(self.pool), dtype=np.int64)
        for char in letters(gold):
            if char in self.postings:
                shared[self.postings[char]] += 1
        same = np.flatnonzero((self.lengths == len(gold)) & (shared > 0))
        yield from same[np.lexsort((self.rank[same], -shared[same]))].tolist()
        yield from np.lexsort((self.rank, -shared, np.abs(self.lengths - len(gold)))).tolist()

    def by_meaning(self, scores: np.ndarray) -> Iterator[int]:
        """Pool ids by BM25 score (best first): the top hits, then all of the pool."""
        if len(scores) > TOP_K:
            top = np.flatnonzero(scores >= np.partition(scores, len(scores) - TOP_K)[len(scores) - TOP_K])
            yield from top[np.lexsort((self.rank[top], -scores[top]))].tolist()
        yield from np.lexsort((self.rank, -scores)).tolist()


def candidate_lines(quotes: list[str], test: list[int], chooser: CandidateChooser, seed: int) -> Iterator[dict]:
    """One {"line", "candidates"} record per test line: the gold and its distractors in a seeded order."""
    cache: dict[str, list[str]] = {}
    for line in test:
        gold = quotes[line]
        if gold not in cache:
            cache[gold] = chooser.distractors(gold)
            if len(cache[gold]) != FORM_DISTRACTORS + MEANING_DISTRACTORS:
                raise SystemExit(f"line {line}: the pool has too few distractors for {gold}")
        candidates = [gold, *cache[gold]]
        random.Random(f"{seed}:{line}").shuffle(candidates)
        yield {"line": line, "candidates": candidates}


def main() -> None:
    """Write DIR/candidates.jsonl and print how many lines it has."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a built dataset folder with data.txt and splits.json")
    parser.add_argument("--idioms", type=Path, required=True, help="idiom dictionary JSON lines (idiom, explanation)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed of the tie-breaks and orders (default {SEED})")
    args = parser.parse_args()
    started = time.perf_counter()
    jieba.setLogLevel(logging.WARNING)
    quotes, test = read_lines(args.dir)
    pool = read_pool(args.idioms, list(dict.fromkeys(quotes)))
    chooser = CandidateChooser(pool, args.seed)
    out = args.dir / "candidates.jsonl"
    records = candidate_lines(quotes, test, chooser, args.seed)
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in records]
    write_text_atomic(out, "".join(lines))  # whole or not at all: a build that stops leaves no half file
    written = len(lines)
    seconds = time.perf_counter() - started
    print(f"{out}: {written:,} test lines, 7 candidates each, from a pool of {len(pool):,} ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
