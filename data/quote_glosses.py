"""Write `glosses.tsv` beside a built dataset: each distinct quote of its data.txt with its source and a gloss.

A gloss is what a reader (or a model) can learn about a quote besides its text: for the idioms of the
modern Chinese set it is the dictionary's explanation (释义) and its source (出处); the English and
classical Chinese quote lists, and the modern Chinese proverb list, have only a `source` column, the
work or author the quote is from, and no gloss (the quote encoder reads a quote's source after its gloss
anyway).

Output: `DIR/glosses.tsv`, UTF-8, header `quote<TAB>source<TAB>gloss`, one row per distinct quote
(column 2 of `DIR/data.txt`) in data.txt's order of first appearance, then one per candidate quote of a
multiple-choice file (`--candidates`) that data.txt lacks, so that every candidate is read with its
gloss; tabs and line breaks inside fields become spaces. A quote is looked up by its text with white
space collapsed (as `quoter data build` writes it into data.txt); the idioms are looked up first, then
the quote lists in the order given; the first record of a text wins, as in the build. A quote found
nowhere gets empty fields.

Usage:
    python data/quote_glosses.py DIR --quotes LIST.tsv [--quotes MORE.tsv]
    python data/quote_glosses.py DIR --idioms idioms.jsonl --quotes proverbs.tsv [--candidates candidates.jsonl]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from idiom_dictionary import Idiom, read_idioms

from quoter.atomic_files import write_text_atomic
from quoter.datasets import load_dataset
from quoter.datasets.mining.quote_lists import collapse_whitespace, read_quote_list
from quoter.evaluation.candidates import read_candidates
from quoter.quote_record import QuoteRecord


def quote_sources(paths: list[Path]) -> dict[str, str]:
    """Quote text -> source from quote lists (the builder's reader); the first record of a text wins."""
    sources: dict[str, str] = {}
    for path in paths:
        for entry in read_quote_list(path):
            sources.setdefault(entry.text, entry.source)
    return sources


def glossed(quotes: list[str], idioms: dict[str, Idiom], sources: dict[str, str]) -> list[QuoteRecord]:
    """One record per quote: an idiom's source and explanation, else the quote list's source and no gloss."""
    records = []
    for quote in quotes:
        key = collapse_whitespace(quote)
        idiom = idioms.get(key)
        if idiom is not None:
            records.append(QuoteRecord(quote, idiom.source, idiom.explanation))
        else:
            records.append(QuoteRecord(quote, sources.get(key, "")))
    return records


def write_glosses(path: Path, records: list[QuoteRecord]) -> None:
    """Write the records as a quote list with the header `quote<TAB>source<TAB>gloss`."""
    lines = ["quote\tsource\tgloss\n", *(f"{r.text}\t{r.source}\t{r.gloss}\n" for r in records)]
    write_text_atomic(path, "".join(lines))


def main() -> None:
    """Write DIR/glosses.tsv and print how many quotes it has and how many got a gloss."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a built dataset folder with data.txt")
    parser.add_argument("--quotes", type=Path, action="append", default=[], help="a quote list TSV (repeatable)")
    parser.add_argument("--idioms", type=Path, help="idiom dictionary JSON lines (idiom, explanation, source)")
    parser.add_argument("--candidates", type=Path, help="a multiple-choice file whose candidates get rows too")
    args = parser.parse_args()
    dataset = load_dataset(args.dir / "data.txt")
    if args.candidates:
        read_candidates(args.candidates, dataset)  # appends the candidates data.txt lacks to its quotes
    idioms = read_idioms(args.idioms) if args.idioms else {}
    records = glossed(dataset.quotes, idioms, quote_sources(args.quotes))
    out = args.dir / "glosses.tsv"
    write_glosses(out, records)
    with_gloss, with_source = sum(bool(r.gloss) for r in records), sum(bool(r.source) for r in records)
    print(f"{out}: {len(records):,} quotes, {with_gloss:,} with a gloss, {with_source:,} with a source")


if __name__ == "__main__":
    main()
