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
import json
import re
from dataclasses import dataclass
from pathlib import Path

NONE_MARK = "无"  # what the idiom dictionary writes for a missing explanation or source
CONTROL = re.compile(r"[\t\r\n]")


@dataclass(frozen=True)
class Gloss:
    """One output row."""

    quote: str
    source: str
    gloss: str


def collapse(text: str) -> str:
    """Collapse runs of white space to one space and trim, as the dataset build does with quote texts."""
    return " ".join(text.split())


def tsv_safe(text: str) -> str:
    """A TSV field: tabs and line breaks become spaces, trimmed."""
    return CONTROL.sub(" ", text).strip()


def clean_field(text: str) -> str:
    """A TSV-safe source or gloss; the dictionary's `无` (none) counts as empty."""
    text = tsv_safe(text)
    return "" if text == NONE_MARK else text


def distinct_quotes(data_file: Path) -> list[str]:
    """The distinct quotes (column 2) of a QuoteR data.txt, in order of first appearance."""
    seen: dict[str, None] = {}
    with data_file.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                raise SystemExit(f"{data_file}:{number}: expected left<TAB>quote<TAB>right, found {len(fields)} fields")
            seen.setdefault(fields[1], None)
    return list(seen)


def candidate_quotes(path: Path) -> list[str]:
    """The distinct candidate quotes of a multiple-choice file (JSON lines with "candidates"), in order."""
    seen: dict[str, None] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                for quote in json.loads(line)["candidates"]:
                    seen.setdefault(quote, None)
    return list(seen)


def read_quote_sources(paths: list[Path]) -> dict[str, str]:
    """Quote text -> source from TSV quote lists (header `quote<TAB>source`); the first record of a text wins."""
    sources: dict[str, str] = {}
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        columns = lines[0].split("\t")
        quote_at = columns.index("quote")
        source_at = columns.index("source") if "source" in columns else None
        for line in lines[1:]:
            fields = line.split("\t")
            if not line.strip() or len(fields) != len(columns):
                continue
            source = fields[source_at] if source_at is not None else ""
            sources.setdefault(collapse(fields[quote_at]), clean_field(source))
    return sources


def read_idioms(path: Path) -> dict[str, tuple[str, str]]:
    """Idiom text -> (source, explanation) from the idiom dictionary's JSON lines; the first record wins."""
    idioms: dict[str, tuple[str, str]] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                entry = (clean_field(record.get("source", "")), clean_field(record.get("explanation", "")))
                idioms.setdefault(collapse(record["idiom"]), entry)
    return idioms


def glosses(quotes: list[str], idioms: dict[str, tuple[str, str]], sources: dict[str, str]) -> list[Gloss]:
    """One row per quote: an idiom's source and explanation, else the quote list's source and no gloss."""
    rows = []
    for quote in quotes:
        key = collapse(quote)
        source, gloss = idioms[key] if key in idioms else (sources.get(key, ""), "")
        rows.append(Gloss(tsv_safe(quote), source, gloss))
    return rows


def write_glosses(path: Path, rows: list[Gloss]) -> None:
    """Write the rows as a TSV with the header `quote<TAB>source<TAB>gloss`."""
    lines = ["quote\tsource\tgloss\n", *(f"{row.quote}\t{row.source}\t{row.gloss}\n" for row in rows)]
    path.write_text("".join(lines), encoding="utf-8")


def main() -> None:
    """Write DIR/glosses.tsv and print how many quotes it has and how many got a gloss."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a built dataset folder with data.txt")
    parser.add_argument("--quotes", type=Path, action="append", default=[], help="a quote list TSV (repeatable)")
    parser.add_argument("--idioms", type=Path, help="idiom dictionary JSON lines (idiom, explanation, source)")
    parser.add_argument("--candidates", type=Path, help="a multiple-choice file whose candidates get rows too")
    args = parser.parse_args()
    idioms = read_idioms(args.idioms) if args.idioms else {}
    quotes, sources = distinct_quotes(args.dir / "data.txt"), read_quote_sources(args.quotes)
    if args.candidates:
        known = set(quotes)
        quotes += [quote for quote in candidate_quotes(args.candidates) if quote not in known]
    rows = glosses(quotes, idioms, sources)
    out = args.dir / "glosses.tsv"
    write_glosses(out, rows)
    glossed, sourced = sum(bool(row.gloss) for row in rows), sum(bool(row.source) for row in rows)
    print(f"{out}: {len(rows):,} quotes, {glossed:,} with a gloss, {sourced:,} with a source")


if __name__ == "__main__":
    main()
