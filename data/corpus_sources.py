"""Write the `--sources` file (file<TAB>source) of a shared/data corpus from its MANIFEST.tsv.

Marks each corpus file with the names a quote's `source` field would use for it, so that
`quoter data build` does not count a quote inside its own source work:

* English books (`en/books`): the author of the Gutenberg folder, as "First Last" and as the surname
  alone ("Wilde, Oscar/..." -> "Oscar Wilde", "Wilde"). Henry Morley's folder is left unmarked: he is the
  editor of an anthology series, not the author of its books.
* Chinese books (`zh-classical/books`, `zh-modern/cm_translations`): the book name, plus the author for
  the books whose pieces the quote lists attribute to an author (e.g. 古文观止's "左丘明《...》" from 国语).

Usage: python data/corpus_sources.py MANIFEST.tsv SOURCES.tsv (written whole or not at all)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from quoter.atomic_files import write_text_atomic

# Folders that are not one author's works.
UNMARKED_AUTHORS = {"Morley, Henry"}
# Authors as the quote lists name them (古文观止 "朝代：作者《篇名》", 菜根谭 and 千字文 lines, idiom sources).
CHINESE_AUTHORS = {
    "国语": ["左丘明"],
    "左传": ["左丘明"],
    "史记": ["司马迁"],
    "汉书": ["班固"],
    "资治通鉴": ["司马光"],
    "说苑": ["刘向"],
    "列女传": ["刘向"],
    "吕氏春秋": ["吕不韦"],
    "淮南子": ["刘安"],
    "贾谊新书": ["贾谊"],
    "郁离子": ["刘基"],
    "菜根谭": ["洪应明"],
    "小窗幽记": ["陈继儒"],
    "围炉夜话": ["王永彬"],
    "千字文": ["周兴嗣"],
    "弟子规": ["李毓秀"],
    "随园诗话": ["袁枚"],
    "随园食单": ["袁枚"],
    "闲情偶寄": ["李渔"],
    "十二楼": ["李渔"],
}
SUFFIXES = re.compile(r",?\s*\b(Jr\.|Sr\.|Sir|graf)$")
PARENTHESES = re.compile(r"\s*\(([^)]*)\)")


def english_names(author_folder: str) -> list[str]:
    """'Andersen, H. C. (Hans Christian)' -> ['H. C. Andersen', 'Hans Christian Andersen', 'Andersen']."""
    if author_folder in UNMARKED_AUTHORS:
        return []
    name = SUFFIXES.sub("", author_folder.strip())
    if "," not in name:
        return [name]  # "Plato", "Dante Alighieri"
    surname, given = (part.strip() for part in name.split(",", 1))
    given = SUFFIXES.sub("", given)
    full_given = PARENTHESES.search(given)
    names = [f"{PARENTHESES.sub('', given)} {surname}"]
    if full_given:
        names.append(f"{full_given.group(1)} {surname}")
    return [*names, surname]


def manifest_sources(manifest: Path) -> list[tuple[str, str]]:
    """(file, source name) rows for every corpus file in a MANIFEST.tsv."""
    lines = manifest.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        record = dict(zip(header, line.split("\t")))
        if "source_path" in record:
            names = english_names(record["source_path"].split("/", 1)[0])
        else:
            names = [record["book"], *CHINESE_AUTHORS.get(record["book"], [])]
        rows.extend((record["file"], name) for name in names)
    return rows


def main() -> None:
    """Write the sources file of the MANIFEST.tsv given first to the file given second; a manifest that
    cannot be read is one line."""
    if len(sys.argv) != 3:
        sys.exit("usage: python data/corpus_sources.py MANIFEST.tsv SOURCES.tsv")
    manifest, out = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        rows = manifest_sources(manifest)
    except OSError as error:
        sys.exit(f"{manifest}: cannot read the manifest: {error.strerror}")
    write_text_atomic(out, "file\tsource\n" + "".join(f"{file}\t{name}\n" for file, name in rows))


if __name__ == "__main__":
    main()
