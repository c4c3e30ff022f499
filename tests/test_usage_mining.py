"""Real usage examples of bank quotes (`quoter data usage`), mined from small corpora written by each test, and
the usage files committed with the bank."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quoter.datasets.mining.usage import UsageConfig, UsageExample, mine_usage
from quoter.datasets.mining.usage_file import HEADER, PARTS, part
from quoter.datasets.mining.usage_forms import RULES
from quoter.datasets.mining.usage_selection import choose_examples, distinct_examples
from quoter.languages import Language
from quoter.quote_bank import load_quote_bank

REPO = Path(__file__).resolve().parent.parent
USAGE = REPO / "quoter" / "quote_bank" / "usage"
LEAP = "Look before you leap."
HEAVEN = "There are more things in heaven and earth, Horatio, than are dreamt of in your philosophy."
CHILD = "When I was a child, I spake as a child, I understood as a child."
BIRD = "The early bird catches the worm every single morning. But the second mouse gets the cheese."
LEARN = "学而时习之，不亦说乎？"
COBBLERS = "三个臭皮匠，顶个诸葛亮。"
CALM = "非淡泊无以明志，非宁静无以致远。"


def words(tag: str, count: int = 50) -> str:
    """`count` distinct words that no quote contains."""
    return " ".join(f"{tag}{i}" for i in range(count))


def han(char: str, count: int = 60) -> str:
    """`count` times one character that no quote contains."""
    return char * count


def write_bank(path: Path, quotes: list[tuple[str, str]]) -> Path:
    path.write_text("quote\tsource\tgloss\n" + "".join(f"{q}\t{s}\t\n" for q, s in quotes), encoding="utf-8")
    return path


def write_corpus(folder: Path, documents: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in documents.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def mine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    quotes: list[tuple[str, str]],
    documents: dict[str, str],
    language: Language = Language.EN,
    **settings,
) -> list[tuple[str, str, str, str, int, str]]:
    """Mine tmp_path/corpus for the quotes, run in tmp_path; the distinct examples as (left, quote, right, file,
    line, rule), in file and line order."""
    monkeypatch.chdir(tmp_path)
    bank = write_bank(tmp_path / "bank.tsv", quotes)
    write_corpus(tmp_path / "corpus", documents)
    config = UsageConfig.for_language(
        language, bank_file=bank, corpus_paths=(Path("corpus"),), progress=False, **settings
    )
    mined = mine_usage(config)
    rows = [
        (e.left, mined.quotes[e.quote_id].text, e.right, e.file, e.line, e.rule)
        for e in distinct_examples(mined.examples)
    ]
    return sorted(rows, key=lambda row: (row[3], row[4]))


def quoter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quoter", *args], capture_output=True, text=True, cwd=cwd)


def test_a_whole_quote_is_found_across_a_line_break_at_the_line_where_it_starts(tmp_path, monkeypatch):
    # Case, punctuation and the hard wrap differ from the bank; the contexts are 40 words, cut from the text.
    document = f"{words('a', 20)}\n{words('b', 30)} look before\nyou LEAP! {words('c', 30)}\n{words('d', 20)}\n"
    found = mine(tmp_path, monkeypatch, [(LEAP, "English proverb")], {"book.txt": document})
    assert len(found) == 1
    left, quote, right, file, line, rule = found[0]
    assert (quote, file, line, rule) == (LEAP, "corpus/book.txt", 2, "verbatim")
    assert left.split() == (words("a", 20) + " " + words("b", 30)).split()[-40:]
    assert right.split() == (words("c", 30) + " " + words("d", 20)).split()[:40]


def test_lines_stay_right_across_blocks_and_after_a_gutenberg_header(tmp_path, monkeypatch):
    header = "The Project Gutenberg eBook\n\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n"
    body = [f"{words(f'l{n}x', 8)}" for n in range(1000)]
    for number in (50, 500, 990):
        body[number] = f"{words(f'p{number}x', 3)} Look before you leap. {words('q', 3)}"
    document = header + "\n".join(body) + "\n"  # about 50,000 characters: several blocks, read with overlaps
    found = mine(tmp_path, monkeypatch, [(LEAP, "English proverb")], {"book.txt": document}, block_chars=2_000)
    assert [line for *_, line, _ in found] == [4 + 50 + 1, 4 + 500 + 1, 4 + 990 + 1]


def test_a_sentence_of_eight_words_counts_and_a_shorter_everyday_one_does_not(tmp_path, monkeypatch):
    quotes = [(BIRD, "Anon"), ("Nothing is certain. We shall see what happens tomorrow morning then.", "Anon")]
    documents = {
        "a.txt": f"{words('a')} the early bird catches the worm every single morning {words('b')}\n",
        "b.txt": f"{words('c')} Nothing is certain. {words('d')}\n",  # 3 words: an everyday phrase
    }
    found = mine(tmp_path, monkeypatch, quotes, documents)
    assert [(quote, file, rule) for _, quote, _, file, _, rule in found] == [(BIRD, "corpus/a.txt", "sentence")]


def test_a_long_first_clause_counts_and_a_short_everyday_one_does_not(tmp_path, monkeypatch):
    documents = {
        "a.txt": f"{words('a')} there are more things in heaven and earth {words('b')}\n",
        "b.txt": f"{words('c')} when I was a child {words('d')}\n",  # 5 words: everyday
    }
    found = mine(tmp_path, monkeypatch, [(HEAVEN, "Shakespeare"), (CHILD, "KJV")], documents)
    assert [(quote, file, rule) for _, quote, _, file, _, rule in found] == [(HEAVEN, "corpus/a.txt", "clause")]


def test_a_chinese_clause_of_five_characters_counts_and_one_of_four_does_not(tmp_path, monkeypatch):
    quotes = [(COBBLERS, "俗语"), ("机不可失，时不再来。", "俗语")]
    documents = {"a.txt": f"{han('甲')}三个臭皮匠{han('乙')}\n{han('丙')}机不可失{han('丁')}\n"}
    found = mine(tmp_path, monkeypatch, quotes, documents, Language.ZH)
    assert [(left, quote, right, line, rule) for left, quote, right, _, line, rule in found] == [
        (han("甲", 50), COBBLERS, han("乙", 50), 1, "clause")
    ]


def test_a_quote_is_not_a_usage_inside_its_own_source_work(tmp_path, monkeypatch):
    documents = {name: f"{words(name)} Look before you leap. {words('b')}\n" for name in ("wilde.txt", "other.txt")}
    sources = tmp_path / "sources.tsv"
    sources.write_text("file\tsource\nwilde.txt\tOscar Wilde\nwilde.txt\tWilde\n", encoding="utf-8")
    quotes = [(LEAP, "Oscar Wilde, Aphorisms")]
    found = mine(tmp_path, monkeypatch, quotes, documents, sources_files=(sources,))
    assert [file for *_, file, _, _ in found] == ["corpus/other.txt"]
    assert len(mine(tmp_path, monkeypatch, quotes, documents)) == 2


def test_a_traditional_or_variant_occurrence_matches_a_simplified_quote_only_as_a_variant(tmp_path, monkeypatch):
    documents = {
        "traditional.txt": f"{han('甲')}學而時習之，不亦說乎{han('乙')}\n",
        "variant.txt": f"{han('丙')}非淡薄无以明志，非宁静无以致远{han('丁')}\n",
        "simplified.txt": f"{han('戊')}学而时习之，不亦说乎{han('己')}\n",
    }
    bank = [(LEARN, "《论语·学而》"), (CALM, "诸葛亮《诫子书》")]
    found = mine(tmp_path, monkeypatch, bank, documents, Language.ZH_CLASSICAL, traditional_to_simplified=True)
    assert [(quote, file, rule) for _, quote, _, file, _, rule in found] == [
        (LEARN, "corpus/simplified.txt", "verbatim"),
        (LEARN, "corpus/traditional.txt", "variant"),
        (CALM, "corpus/variant.txt", "variant"),
    ]
    assert found[1][0] == han("甲", 50) and found[2][2] == han("丁", 50)
    without_t2s = mine(tmp_path, monkeypatch, bank, documents, Language.ZH_CLASSICAL)
    assert [file for *_, file, _, _ in without_t2s] == ["corpus/simplified.txt", "corpus/variant.txt"]


def write_idioms(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_idiom_examples_give_the_contexts_around_the_idiom_and_other_quotes_written_out(tmp_path, monkeypatch):
    idioms = write_idioms(
        tmp_path / "idioms.jsonl",
        [
            {"idiom": "画蛇添足", "example": "无", "source": "《战国策》"},
            {"idiom": "一心一意", "example": "他每天～地工作，从不抱怨。★《某书》", "source": "无"},
            {"idiom": "集思广益", "example": "大家说三个臭皮匠，顶个诸葛亮，还是～好。", "source": "无"},
            {"idiom": "胸有成竹", "example": "他画竹子之前早已胸有成竹。", "source": "无"},
        ],
    )
    quotes = [("一心一意", "成语"), (COBBLERS, "俗语"), ("胸有成竹", "成语"), ("集思广益", "成语")]
    found = mine(tmp_path, monkeypatch, quotes, {"empty.txt": "无关\n"}, Language.ZH, examples_file=idioms)
    assert [(left, quote, right, line, rule) for left, quote, right, _, line, rule in found] == [
        ("他每天", "一心一意", "地工作，从不抱怨。", 2, "idiom-example"),  # the ★ attribution is cut off
        ("大家说", COBBLERS, "还是集思广益好。", 3, "verbatim"),
        ("大家说三个臭皮匠，顶个诸葛亮，还是", "集思广益", "好。", 3, "idiom-example"),
        ("他画竹子之前早已", "胸有成竹", "", 4, "verbatim"),
    ]
    assert {file for *_, file, _, _ in found} == {"idioms.jsonl"}


def test_each_context_is_kept_once_by_its_strictest_rule():
    same = {"left": "a b", "quote_id": 0, "right": "c d"}
    examples = [
        UsageExample(**same, file="z.txt", line=9, rule="clause"),
        UsageExample(**same, file="y.txt", line=3, rule="verbatim"),
        UsageExample(**same, file="a.txt", line=1, rule="variant"),
    ]
    assert distinct_examples(examples) == [examples[1]]


def test_at_most_the_cap_per_quote_with_the_files_spread():
    examples = [UsageExample(f"l{n}", 0, "r", "a.txt", n + 1, "verbatim") for n in range(20)]
    examples += [UsageExample(f"m{n}", 0, "r", "b.txt", n + 1, "clause") for n in range(3)]
    examples += [UsageExample("x", 1, "r", "a.txt", 1, "verbatim")]
    chosen = choose_examples(examples, cap=12)
    assert [(e.quote_id, e.file, e.line) for e in chosen] == [
        *((0, "a.txt", line) for line in range(1, 10)),
        *((0, "b.txt", line) for line in range(1, 4)),
        (1, "a.txt", 1),
    ]
    assert choose_examples(list(reversed(examples)), cap=12) == chosen


def test_the_held_back_part_is_a_fixed_quarter_of_the_sources_each_held_back_whole():
    # A book is one source: every line of it on one side.
    for book in ("en/books/a.txt", "zh-classical/books/论语.txt"):
        assert len({part(book, line) for line in range(1, 500)}) == 1
    books = [part(f"en/books/book{number}.txt", 1) for number in range(2000)]
    assert set(books) == set(PARTS) and 0.2 < books.count("held-back") / len(books) < 0.3
    # A file of records (the idiom dictionary): each record is a source of its own.
    records = [part("zh-modern/idioms.jsonl", line) for line in range(1, 2001)]
    assert 0.2 < records.count("held-back") / len(records) < 0.3
    keys = (("en/books/a.txt", 7, "en/books/a.txt"), ("zh-modern/idioms.jsonl", 9, "zh-modern/idioms.jsonl:9"))
    for file, line, key in keys:
        first_byte = hashlib.sha256(key.encode()).digest()[0]
        assert part(file, line) == ("held-back" if first_byte < 64 else "fit")


def test_the_command_writes_the_usage_file_and_prints_the_rule_table(tmp_path):
    write_bank(tmp_path / "bank.tsv", [(LEAP, "English proverb"), (HEAVEN, "Shakespeare"), (CHILD, "KJV")])
    write_corpus(
        tmp_path / "books",
        {
            f"b{k}.txt": f"{words(f'x{k}')} Look before you\tleap! {words(f'y{k}')}\n{words(f'z{k}')} there are more "
            f"things in heaven and earth.\n"
            for k in range(14)
        },
    )
    out = tmp_path / "usage" / "en.real.tsv"
    done = quoter(
        "data", "usage", "--lang", "en", "--bank", "bank.tsv", "--corpus", "books", "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "| clause   | +14 " in done.stdout and "| 2 of 3 " in done.stdout
    assert "24 examples of 2 of the 3 quotes written to" in done.stdout
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == list(HEADER) and len(lines) == 25
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == len(HEADER) for row in rows)
    assert {row[1] for row in rows} == {LEAP, HEAVEN}  # the bank's text, not the text as found
    assert {row[3] for row in rows} <= {f"books/b{k}.txt" for k in range(14)}
    assert all(row[6] == part(row[3], int(row[4])) for row in rows)
    assert sum(row[1] == LEAP for row in rows) == 12 and sum(row[1] == HEAVEN for row in rows) == 12


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--corpus", "missing"], "missing: corpus path not found"),
        (["--corpus", "books", "--bank", "bad-bank.tsv"], "bad-bank.tsv:3: expected 2 or 3 tab-separated fields"),
        (["--corpus", "books", "--examples", "bad.jsonl"], "bad.jsonl:2: not valid JSON"),
        (["--corpus", "books", "--sources", "bad-sources.tsv"], "bad-sources.tsv:1: expected the header"),
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_line(tmp_path, arguments, message):
    write_bank(tmp_path / "bank.tsv", [(LEAP, "English proverb")])
    (tmp_path / "bad-bank.tsv").write_text(f"quote\tsource\n{LEAP}\tx\nno source column\n", encoding="utf-8")
    write_idioms(tmp_path / "bad.jsonl", [{"idiom": "一心一意", "example": "～"}])
    with (tmp_path / "bad.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    (tmp_path / "bad-sources.tsv").write_text("name\tsource\n", encoding="utf-8")
    write_corpus(tmp_path / "books", {"a.txt": "Look before you leap.\n"})
    done = quoter("data", "usage", "--lang", "en", "--bank", "bank.tsv", *arguments, "--out", "out.tsv", cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}")
    assert not (tmp_path / "out.tsv").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_usage_target_without_the_shared_data_stops_in_one_line(tmp_path):
    shared = tmp_path / "no-shared-data"
    done = subprocess.run(
        ["make", "-s", "-C", str(REPO / "data"), "usage-zh", f"SHARED_DATA={shared}", f"USAGE={tmp_path / 'usage'}"],
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make: ")]
    assert done.returncode != 0 and len(lines) == 1
    assert f"SHARED_DATA={shared} has no zh-modern/cm_translations/MANIFEST.tsv" in lines[0]
    assert not (tmp_path / "usage").exists()


@pytest.mark.parametrize("language", list(Language))
def test_the_committed_usage_files_are_well_formed(language):
    lines = (USAGE / f"{language.value}.real.tsv").read_text(encoding="utf-8").split("\n")
    assert lines[0].split("\t") == list(HEADER) and lines[-1] == ""
    rows = [line.split("\t") for line in lines[1:-1]]
    bank = {record.text for record in load_quote_bank(language)}
    assert rows and all(len(row) == len(HEADER) for row in rows)
    for left, quote, right, file, line, rule, held in rows:
        assert quote in bank and (left or right) and int(line) >= 1 and not Path(file).is_absolute()
        assert rule in RULES and held == part(file, int(line))
    assert len({(left, quote, right) for left, quote, right, *_ in rows}) == len(rows)
    assert max(sum(row[1] == quote for row in rows) for quote in bank) <= 12
