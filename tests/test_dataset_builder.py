"""The dataset builder on a small corpus and quote list written by each test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from quoter.datasets import load_dataset
from quoter.datasets.mining import BuildConfig, build_dataset
from quoter.datasets.mining.corpus import CorpusFile, read_blocks
from quoter.datasets.mining.sentences import choose_splitter, split_english
from quoter.errors import InputError, QuoterError
from quoter.languages import Language

EARLY_BIRD = "The early bird catches the worm every single morning. But the second mouse gets the cheese in the end."
FIRST_SENTENCE, SECOND_SENTENCE = EARLY_BIRD.split(". ")
LEAP = "Look before you leap."


def filler(tag: str, count: int) -> list[str]:
    """`count` distinct words that no quote contains."""
    return [f"{tag}{i}" for i in range(count)]


def passage(tag: str, quotation: str, words: int = 60) -> str:
    """A quotation with `words` filler words on each side."""
    return " ".join([*filler(f"{tag}l", words), quotation, *filler(f"{tag}r", words)]) + "\n"


def write_quotes(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("quote\tsource\n" + "".join(f"{quote}\t{source}\n" for quote, source in rows), encoding="utf-8")
    return path


def build(tmp_path: Path, quotes: list[tuple[str, str]], documents: dict[str, str], **settings):
    """Write the inputs, build into tmp_path/out, and return (report, dataset, (left, quote, right) triples)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    for name, text in documents.items():
        (corpus / name).write_text(text, encoding="utf-8")
    language = settings.pop("language", Language.EN)
    config = BuildConfig.for_language(
        language,
        quote_files=(write_quotes(tmp_path / "quotes.tsv", quotes),),
        corpus_paths=(corpus,),
        out_dir=settings.pop("out_dir", tmp_path / "out"),
        min_occurrences=settings.pop("min_occurrences", 3),
        use_stanza=False,
        progress=False,
        **settings,
    )
    report = build_dataset(config)
    dataset = load_dataset(config.out_dir / "data.txt")
    triples = [(s.left, dataset.quotes[s.quote_id], s.right) for s in dataset.samples]
    return report, dataset, triples


def test_english_windows_are_40_words_on_each_side_and_keep_the_original_text(tmp_path):
    # Line breaks, case and a curly apostrophe differ from the quote list; the contexts keep the original.
    quotation = "look before\nyou LEAP!"
    documents = {f"d{k}.txt": passage(f"D{k}x", quotation) for k in range(3)}
    _, _, triples = build(tmp_path, [(LEAP, "")], documents)
    assert len(triples) == 3
    for left, quote, right in triples:
        tag = left.split()[0][:3]
        assert quote == LEAP
        assert left.split() == filler(f"{tag}l", 60)[-40:]
        assert right.split() == filler(f"{tag}r", 60)[:40]  # the "!" closing the quotation is not context


def test_chinese_windows_are_50_characters_on_each_side(tmp_path):
    quote = "学而时习之，不亦说乎"
    far, near = "甲戊己", "乙庚辛"  # a pair of characters per document
    documents = {f"d{k}.txt": f"{far[k] * 30}{near[k] * 30}\n{quote}？{near[k] * 30}{far[k] * 30}\n" for k in range(3)}
    _, _, triples = build(tmp_path, [(quote, "论语")], documents, language=Language.ZH_CLASSICAL)
    assert len(triples) == 3
    for left, found, right in triples:
        k = near.index(right[0])
        assert found == quote
        assert left == far[k] * 20 + near[k] * 30  # 50 characters; the line break is not one
        assert right == near[k] * 30 + far[k] * 20  # the "？" closing the quotation is not context


def test_multi_sentence_and_partial_quotations_are_found(tmp_path):
    documents = {
        # Both sentences next to each other, wrapped over lines: one occurrence of the whole quote.
        "whole.txt": passage("W", EARLY_BIRD.replace("every ", "every\n")),
        # The second sentence alone: a partial quotation, long enough (10 words) to count.
        "partial.txt": passage("P", SECOND_SENTENCE + "."),
        # Both sentences, but far apart: two partial occurrences, not one.
        "apart.txt": " ".join(
            [*filler("Aa", 50), FIRST_SENTENCE + ".", *filler("Ab", 50), SECOND_SENTENCE + ".", *filler("Ac", 50)]
        ),
    }
    _, _, triples = build(tmp_path, [(EARLY_BIRD, ""), (LEAP, "")], documents)
    by_tag = {}
    for left, quote, right in triples:
        assert quote == EARLY_BIRD
        by_tag.setdefault(left.split()[-1][:2], []).append((left, right))
    whole_left, whole_right = by_tag["Wl"][0]
    assert len(by_tag["Wl"]) == 1 and whole_right.split()[0] == "Wr0"  # one occurrence spanning both sentences
    assert by_tag["Pl"][0][1].split()[0] == "Pr0"
    assert len(triples) == 4  # whole, partial, and the two apart
    assert any(right.startswith("Ab0") for left, right in by_tag["Aa"])


def test_short_partial_quotations_do_not_count(tmp_path):
    quote = "I do not know. The answer is blowing in the wind tonight my friend."
    documents = {f"d{k}.txt": passage(f"D{k}x", "I do not know.") for k in range(4)}
    documents["full.txt"] = passage("F", quote)
    with pytest.raises(QuoterError, match="no quote was found at least 3 times"):
        build(tmp_path, [(quote, "")], documents)


def test_duplicate_pairs_and_self_citations_are_dropped(tmp_path):
    documents = {f"d{k}.txt": passage(f"D{k}x", LEAP) for k in range(3)}
    documents["copy.txt"] = documents["d0.txt"]  # a second edition of the same text: the same pairs
    documents["own_work.txt"] = passage("O", LEAP) + passage("Q", LEAP)
    sources = tmp_path / "sources.tsv"
    sources.write_text("file\tsource\nown_work.txt\tJohn Heywood\n", encoding="utf-8")
    report, _, triples = build(tmp_path, [(LEAP, "John Heywood, Proverbs (1546)")], documents, sources_file=sources)
    assert len(triples) == 3
    assert report.duplicate_pairs == 1
    assert report.self_citations == 2
    assert not any(left.startswith(("Ol", "Ql")) for left, _, _ in triples)


def test_minimum_occurrences_and_cap_per_quote(tmp_path):
    rare = "Fortune favours the bold and the brave."
    documents = {f"l{k}.txt": passage(f"L{k}x", LEAP) for k in range(9)}
    documents.update({f"r{k}.txt": passage(f"R{k}x", rare) for k in range(2)})
    report, dataset, triples = build(tmp_path, [(LEAP, ""), (rare, "")], documents, max_contexts=6)
    assert dataset.quotes == [LEAP]
    assert len(triples) == 6
    assert (report.rare_quotes, report.rare_pairs, report.capped_pairs) == (1, 2, 3)


def split_fixture(tmp_path: Path, seed: int = 13, out: str = "out"):
    quotes = [(f"Proverb number{k} says that patience is golden.", "") for k in range(20)]
    documents = {
        f"q{k:02d}_{n}.txt": passage(f"Q{k}n{n}x", quote) for k, (quote, _) in enumerate(quotes) for n in range(5)
    }
    return build(
        tmp_path, quotes, documents, zero_shot_quotes=2, max_zero_shot_fraction=0.1, seed=seed, out_dir=tmp_path / out
    )


def test_split_puts_every_quote_in_valid_and_test_and_zero_shot_quotes_only_there(tmp_path):
    report, dataset, _ = split_fixture(tmp_path)
    assert dataset.splits is not None and len(dataset.samples) == 100
    train, valid, test = (dataset.quote_counts(name) for name in ("train", "valid", "test"))
    assert (valid > 0).all() and (test > 0).all()
    assert len(dataset.zero_shot_quote_ids()) == report.zero_shot == 2
    assert int((train == 0).sum()) == 2
    # Each quote once in valid and once in test is already more than 10%; the zero-shot quotes' 5 pairs
    # are shared out between valid and test, and the other 18 quotes keep their remaining 3 in train.
    assert len(dataset.split("train")) == 18 * 3
    assert abs(len(dataset.split("valid")) - len(dataset.split("test"))) <= 2


def test_same_seed_gives_the_same_files_and_another_seed_another_split(tmp_path):
    split_fixture(tmp_path, seed=5, out="a")
    split_fixture(tmp_path, seed=5, out="b")
    split_fixture(tmp_path, seed=6, out="c")
    for name in ("data.txt", "splits.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "data.txt").read_bytes() != (tmp_path / "c" / "data.txt").read_bytes()


def test_outputs_are_quoter_files_with_splits_and_statistics(tmp_path):
    split_fixture(tmp_path)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["data.txt", "splits.json", "stats.md"]
    splits = json.loads((out / "splits.json").read_text(encoding="utf-8"))
    assert splits["train"] == [0, 54] and splits["valid"][0] == 54 and splits["test"] == [splits["valid"][1], 100]
    stats = (out / "stats.md").read_text(encoding="utf-8")
    assert "54/18" in stats and "Zero-shot quotes (in valid or test, never in train): 2" in stats
    assert "rule-based en sentence splitter" in stats
    assert not list(tmp_path.glob(".out.*"))  # no staging folder left behind


def test_formulaic_quotes_over_the_document_frequency_cap_are_dropped_and_reported(tmp_path):
    stock = "Thank you very much indeed."
    documents = {f"s{k}.txt": passage(f"S{k}x", stock) for k in range(6)}
    documents.update({f"l{k}.txt": passage(f"L{k}x", LEAP) for k in range(3)})
    report, dataset, _ = build(
        tmp_path, [(stock, ""), (LEAP, "")], documents, max_document_frequency=0.5, min_documents_for_frequency_cap=5
    )
    assert dataset.quotes == [LEAP]
    assert report.formulaic == [(stock, 6)]
    assert "Thank you very much indeed." in (tmp_path / "out" / "stats.md").read_text(encoding="utf-8")


def test_project_gutenberg_boilerplate_is_stripped(tmp_path):
    header = "The Project Gutenberg EBook of Proverbs\nLook before you leap. (licence text)\n" + "x\n" * 5
    start = "*** START OF THIS PROJECT GUTENBERG EBOOK PROVERBS ***\n\nProduced by Someone\n\n"
    end = "*** END OF THIS PROJECT GUTENBERG EBOOK PROVERBS ***\nLook before you leap. Project Gutenberg licence.\n"
    documents = {f"d{k}.txt": header + start + passage(f"D{k}x", LEAP) + end for k in range(3)}
    report, _, triples = build(tmp_path, [(LEAP, "")], documents)
    assert len(triples) == 3 and report.occurrences == 3
    assert not any("Gutenberg" in left + right or "Produced" in left for left, _, right in triples)


def test_blocks_give_the_same_pairs_as_whole_files(tmp_path):
    text = "".join(passage(f"B{k}x", LEAP if k % 2 else EARLY_BIRD, words=45).replace(" ", "\n", 30) for k in range(40))
    documents = {f"d{k}.txt": text.replace("B", f"D{k}") for k in range(3)}
    _, _, whole = build(tmp_path, [(LEAP, ""), (EARLY_BIRD, "")], documents, out_dir=tmp_path / "whole")
    _, _, blocks = build(
        tmp_path, [(LEAP, ""), (EARLY_BIRD, "")], documents, out_dir=tmp_path / "blocks", block_chars=700
    )
    assert sorted(whole) == sorted(blocks) and len(whole) == 120
    document = CorpusFile(0, tmp_path / "corpus" / "d0.txt", 0)
    assert len(list(read_blocks(document, block_chars=700, margin_chars=300, strip_gutenberg=True))) > 10


def test_example_sentences_give_occurrences_of_their_quote(tmp_path):
    records = [
        {"idiom": "一心一意", "example": f"他{k}号每天～地工作，从不抱怨。★《某书》", "source": "无"} for k in range(3)
    ] + [{"idiom": "画蛇添足", "example": "无", "source": "《战国策》"}]
    examples = tmp_path / "idioms.jsonl"
    examples.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    config = BuildConfig.for_language(
        Language.ZH,
        quote_files=(),
        corpus_paths=(),
        example_files=(examples,),
        out_dir=tmp_path / "out",
        use_stanza=False,
        progress=False,
    )
    report = build_dataset(config)
    dataset = load_dataset(tmp_path / "out" / "data.txt")
    assert report.quotes == 2 and report.example_sentences == 3
    assert dataset.quotes == ["一心一意"]
    assert sorted(s.left for s in dataset.samples) == ["他0号每天", "他1号每天", "他2号每天"]
    assert {s.right for s in dataset.samples} == {"地工作，从不抱怨。"}  # the ★ attribution is cut off


def test_traditional_chinese_is_converted_when_asked(tmp_path):
    documents = {f"d{k}.txt": f"{k}號說：學而時習之，不亦說乎？此言甚善。\n" for k in range(3)}
    report, dataset, triples = build(
        tmp_path, [("学而时习之，不亦说乎", "")], documents, language=Language.ZH, traditional_to_simplified=True
    )
    assert dataset.quotes == ["学而时习之，不亦说乎"]
    assert sorted(left for left, _, _ in triples) == ["0号说：", "1号说：", "2号说："]


def test_rule_based_sentence_splitter_keeps_abbreviations_and_names_itself():
    assert split_english('Mr. Smith met J. M. Barrie. "Hello," he said! Then he left.') == [
        "Mr. Smith met J. M. Barrie.",
        '"Hello," he said!',
        "Then he left.",
    ]
    chosen = choose_splitter(Language.EN, use_stanza=False)
    assert chosen.description.startswith("rule-based en sentence splitter")


def test_bad_inputs_name_the_file_and_line(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"fine line\nbad \xff byte\n")
    quotes = write_quotes(tmp_path / "q.tsv", [(LEAP, "")])
    settings = {"corpus_paths": (corpus,), "out_dir": tmp_path / "out", "use_stanza": False, "progress": False}
    with pytest.raises(InputError) as error:
        build_dataset(BuildConfig.for_language(Language.EN, quote_files=(quotes,), **settings))
    assert str(error.value).startswith(f"{corpus}:2:")
    malformed = tmp_path / "m.tsv"
    malformed.write_text("quote\tsource\nA quote\twith\tthree fields\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"m\.tsv:2: expected 2 tab-separated fields"):
        build_dataset(BuildConfig.for_language(Language.EN, quote_files=(malformed,), **settings))
    unknown = tmp_path / "u.tsv"
    unknown.write_text("quote\tauthor\nA quote\tSomeone\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"u\.tsv:1 \(field 'author'\): unknown column"):
        build_dataset(BuildConfig.for_language(Language.EN, quote_files=(unknown,), **settings))


def test_output_folder_with_other_files_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(QuoterError, match="holds other files"):
        build(tmp_path, [(LEAP, "")], {f"d{k}.txt": passage(f"D{k}x", LEAP) for k in range(3)})
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_command_line_builds_and_reports_errors_in_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(3):
        (corpus / f"d{k}.txt").write_text(passage(f"D{k}x", LEAP), encoding="utf-8")
    quotes = write_quotes(tmp_path / "q.tsv", [(LEAP, "")])
    command = [
        sys.executable,
        "-m",
        "quoter",
        "data",
        "build",
        "--lang",
        "en",
        "--corpus",
        str(corpus),
        "--no-progress",
        "--min-occurrences",
        "3",
        "--no-stanza",
    ]
    done = subprocess.run(
        [*command, "--quotes", str(quotes), "--out", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "sentence splitter: rule-based en sentence splitter" in done.stdout
    assert "3 pairs of 1 quotes" in done.stdout
    failed = subprocess.run(
        [*command, "--quotes", str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "o2")],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 2
    assert failed.stderr.strip() == f"error: {tmp_path / 'missing.tsv'}: file not found"


def test_chinese_blocks_give_the_same_pairs_as_whole_files(tmp_path):
    quote = "己所不欲，勿施于人"
    documents = {
        f"d{d}.txt": "".join(
            f"{d}{k:04d}{'甲乙丙丁'[k % 4] * 20}{quote}。{'子丑寅卯'[k % 4] * 20}\n" for k in range(400)
        )
        for d in range(3)
    }
    quotes = [(quote, "论语")]
    settings = {"language": Language.ZH_CLASSICAL, "max_contexts": 10_000}
    _, _, whole = build(tmp_path, quotes, documents, out_dir=tmp_path / "whole", **settings)
    _, _, blocks = build(tmp_path, quotes, documents, out_dir=tmp_path / "blocks", block_chars=500, **settings)
    assert sorted(whole) == sorted(blocks) and len(whole) == 3 * 400
