"""Reading QuoteR files and splits: good files load exactly, broken ones are located precisely."""

import json

import pytest

from quoter.datasets import dataset_stats, load_dataset, read_samples, render_stats
from quoter.errors import InputError

ROWS = [
    ("left a", "Quote one", "right a"),
    ("left b", "Quote two", "right b"),
    ("left c", "  Quote one ", "right c"),  # surrounding white space does not make a new quote
    ("", "Quote two", ""),  # empty contexts are valid (a quote at the start or end of a text)
    ("left e", "Quote three", "right e"),
    ("left f", "Quote one", "right f"),
]
SPLITS = {"train": [0, 3], "valid": [3, 5], "test": [5, 6]}


def test_tsv_reader_builds_the_quote_set_in_order_of_first_appearance(write_dataset):
    quotes, samples = read_samples(write_dataset(ROWS))
    assert quotes == ["Quote one", "Quote two", "Quote three"]
    assert [s.quote_id for s in samples] == [0, 1, 0, 1, 2, 0]
    assert (samples[3].left, samples[3].right) == ("", "")
    assert [s.line for s in samples] == [1, 2, 3, 4, 5, 6]


def test_jsonl_reader_reads_the_same_dataset(tmp_path, write_dataset):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"left": l, "quote": q, "right": r}) + "\n" for l, q, r in ROWS))
    assert read_samples(path) == read_samples(write_dataset(ROWS))


def test_windows_line_ends_are_accepted(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"l1\tq1\tr1\r\nl2\tq2\tr2\r\n")
    quotes, samples = read_samples(path)
    assert quotes == ["q1", "q2"] and samples[1].right == "r2"


def test_splits_from_sidecar_file(write_dataset):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    assert [len(dataset.split(s)) for s in ("train", "valid", "test")] == [3, 2, 1]
    assert dataset.split("valid")[1].quote_id == 2
    assert dataset.zero_shot_quote_ids() == {2}
    assert dataset.quote_counts("train").tolist() == [2, 1, 0]


def test_generic_splits_json_beside_the_file_is_found(tmp_path, write_dataset):
    path = write_dataset(ROWS)
    (tmp_path / "splits.json").write_text(json.dumps(SPLITS))
    assert load_dataset(path).splits == {"train": (0, 3), "valid": (3, 5), "test": (5, 6)}


def test_extra_keys_in_splits_are_allowed(tmp_path, write_dataset):
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({**SPLITS, "seed": 13, "note": "built by hand"}))
    assert load_dataset(write_dataset(ROWS), splits=splits).splits["test"] == (5, 6)


def test_official_part_uses_the_fixed_line_indices(tmp_path):
    path = tmp_path / "modern.txt"
    path.write_text("".join(f"l{i}\tq{i % 7}\tr{i}\n" for i in range(36700)))
    dataset = load_dataset(path, part="modern_chinese")
    assert dataset.splits == {"train": (0, 32472), "valid": (32472, 36657), "test": (36657, 36700)}


def test_official_part_refuses_a_file_that_is_too_short(write_dataset):
    with pytest.raises(InputError, match="official 'english' part needs more than 113942"):
        load_dataset(write_dataset(ROWS), part="english")


def test_unknown_part_names_the_known_ones(write_dataset):
    with pytest.raises(InputError, match="english, modern_chinese, ancient_chinese"):
        load_dataset(write_dataset(ROWS), part="klingon")


@pytest.mark.parametrize(
    "content, line, message",
    [
        (b"a\tq\tb\nonly two\tfields\n", 2, "expected 3 tab-separated fields"),
        (b"a\tq\tb\na\tq\tb\tc\n", 2, "found 4"),
        (b"a\tq\tb\na\t \tb\n", 2, "the quote is empty"),
        ("a\tq\tb\na\t\u200b\ufeff\u0301\tb\n".encode(), 2, "the quote is empty"),
        (b"a\tq\tb\n\n", 2, "found 1"),
        (b"a\tq\tb\na\tq\t\xff\xfe\n", 2, "not valid UTF-8"),
    ],
)
def test_broken_tsv_lines_are_located(tmp_path, content, line, message):
    path = tmp_path / "broken.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as error:
        read_samples(path)
    assert str(error.value).startswith(f"{path}:{line}")


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"left": "a", "quote": "q"', "not valid JSON"),
        ('["a", "q", "b"]', "expected a JSON object"),
        ('{"left": "a", "quote": 3, "right": "b"}', "field 'quote'.*expected a string"),
        ('{"left": "a", "right": "b"}', "the quote is empty"),
        # A lone surrogate is no text: the tokenizer would fail on it with a TypeError.
        ('{"left": "a", "quote": "q", "right": "b\\ud800"}', "field 'right'.*character 2 is a lone surrogate"),
    ],
)
def test_broken_jsonl_lines_are_located(tmp_path, line, message):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"left": "a", "quote": "q", "right": "b"}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as error:
        read_samples(path)
    assert str(error.value).startswith(f"{path}:2")


def test_missing_and_empty_files_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="data file not found"):
        read_samples(tmp_path / "nope.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="no samples"):
        read_samples(tmp_path / "empty.txt")


@pytest.mark.parametrize(
    "splits, message",
    [
        ({"train": [0, 4], "valid": [3, 5], "test": [5, 6]}, "'train' \\[0, 4\\] and 'valid' \\[3, 5\\] overlap"),
        ({"train": [0, 3], "valid": [3, 5], "test": [5, 7]}, "runs past the end of the data \\(6 samples\\)"),
        ({"train": [0, 3], "valid": [3, 5]}, "field 'test'.*missing split"),
        ({"train": [0, 3], "valid": [5, 3], "test": [5, 6]}, "0 <= start <= end"),
        ({"train": [0, 3], "valid": [3, 5], "test": [5, True]}, "two integers"),
        ({"train": [0, 3], "valid": "3-5", "test": [5, 6]}, "field 'valid'"),
        ([[0, 3], [3, 5], [5, 6]], "expected a JSON object"),
    ],
)
def test_bad_splits_are_refused_with_the_reason(tmp_path, write_dataset, splits, message):
    path = tmp_path / "bad.splits.json"
    path.write_text(json.dumps(splits))
    with pytest.raises(InputError, match=message) as error:
        load_dataset(write_dataset(ROWS), splits=path)
    assert str(path) in str(error.value)


def test_empty_ranges_do_not_overlap(tmp_path, write_dataset):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"train": [0, 6], "valid": [3, 3], "test": [6, 6]}))
    assert load_dataset(write_dataset(ROWS), splits=path).split("valid") == []


def test_splits_json_syntax_error_gives_the_line(tmp_path, write_dataset):
    path = tmp_path / "s.json"
    path.write_text('{\n"train": [0, 3],\n"valid": [3, 5]\n"test": [5, 6]}')
    with pytest.raises(InputError, match=f"{path}:4: not valid JSON"):
        load_dataset(write_dataset(ROWS), splits=path)


def test_without_splits_evaluation_asks_for_them(write_dataset):
    dataset = load_dataset(write_dataset(ROWS))
    with pytest.raises(InputError, match="no splits are known"):
        dataset.split("test")


def test_statistics_give_table_1_and_table_4(write_dataset):
    stats = dataset_stats(load_dataset(write_dataset(ROWS, SPLITS)))
    assert stats.split_pairs == {"train": 3, "valid": 2, "test": 1}
    assert stats.split_quotes == {"train": 2, "valid": 2, "test": 1}
    assert stats.zero_shot_quotes == 1
    assert stats.frequency_ranges == [("[1,10]", 3)]
    text = render_stats(stats)
    assert "| pairs/quotes | 3/2" in text and "6/3" in text
    assert "Zero-shot quotes (in valid or test, never in train): 1" in text
