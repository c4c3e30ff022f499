"""Evaluation ranks against the full quote set, averages over contexts, and reports subsets."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from quoter.datasets import load_dataset
from quoter.errors import InputError
from quoter.evaluation import evaluate, render_report
from quoter.evaluation.candidates import read_candidates
from quoter.metrics import rank_metrics

ROWS = (
    [("l", "q0", "r")] * 4
    + [("l", "q1", "r")] * 12
    + [("l", "q2", "r")]  # train: q0 x4, q1 x12, q2 x1
    + [("l", "q0", "r"), ("l", "q1", "r"), ("l", "q2", "r"), ("l", "q3", "r")]  # test; q3 is zero-shot
)
SPLITS = {"train": [0, 17], "valid": [17, 17], "test": [17, 21]}


class FixedScores:
    """A ranker that gives each query the next row of a fixed score matrix, and remembers the queries."""

    def __init__(self, scores):
        self.scores, self.seen, self.next = np.asarray(scores, dtype=float), [], 0

    def score(self, queries):
        rows = self.scores[self.next : self.next + len(queries)]
        self.next += len(queries)
        self.seen.extend(queries)
        return rows


def test_ranks_subsets_and_buckets(write_dataset):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    # Gold quotes of the test rows are q0, q1, q2, q3; their ranks below are 1, 3, 2 and 4.
    scores = [[9, 1, 2, 3], [5, 1, 3, 0], [0, 8, 7, 1], [4, 4, 4, 4]]
    ranker = FixedScores(scores)
    report = evaluate(ranker, dataset, "test", "fixed", batch_size=3)  # batches of 3 and 1
    assert report.ranks.tolist() == [1, 3, 2, 4]
    assert report.overall == rank_metrics([1, 3, 2, 4])  # over contexts, not over batches
    assert report.zero_shot == rank_metrics([4])
    assert [(b["train_contexts"], b["quotes"], b["n"]) for b in report.buckets] == [
        ("0", 1, 1),
        ("1-2", 1, 1),
        ("3-5", 1, 1),
        ("11-20", 1, 1),
    ]
    assert report.to_json()["quotes"] == 4
    table = render_report(report)
    assert "zero-shot quotes" in table and "11-20" in table


@pytest.mark.parametrize("left_only", [False, True])
def test_left_only_drops_the_right_context(write_dataset, left_only):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    ranker = FixedScores(np.zeros((4, 4)))
    evaluate(ranker, dataset, "test", "fixed", left_only=left_only)
    assert {q.right for q in ranker.seen} == ({""} if left_only else {"r"})
    assert {q.left for q in ranker.seen} == {"l"}


def test_an_empty_split_is_refused(write_dataset):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    with pytest.raises(InputError, match="the 'valid' split is empty"):
        evaluate(FixedScores(np.zeros((1, 4))), dataset, "valid", "fixed")


def write_candidates(path, lines):
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def test_multiple_choice_counts_a_context_right_only_when_its_gold_beats_every_other_candidate(write_dataset, tmp_path):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    lines = [
        {"line": 17, "candidates": ["q1", "q0", "new"]},  # gold q0
        {"line": 18, "candidates": ["q1", "q2"]},  # gold q1
        {"line": 19, "candidates": ["q2", "new", "q3"]},  # gold q2
    ]
    candidates = read_candidates(write_candidates(tmp_path / "c.jsonl", lines), dataset)
    # 'new' is not a quote of the file: it joins the quote set for this evaluation as quote 4.
    assert dataset.quotes[4:] == ["new"] and candidates.full_set == 4
    scores = [[9, 1, 2, 3, 10], [5, 1, 3, 0, 0], [0, 8, 7, 1, 7], [4, 4, 4, 4, 9]]
    report = evaluate(FixedScores(scores), dataset, "test", "fixed", candidates=candidates)
    # Line 17: 'new' outscores the gold; line 18: q1 (1) loses to q2 (3); line 19: a tie counts against the gold.
    assert report.candidate_correct.tolist() == [False, False, False]
    assert report.ranks.tolist() == [1, 3, 2, 4]  # full-set ranks never count the added quote
    assert report.to_json()["quotes"] == 4
    scores[0][4], scores[2][4] = 0, 6
    report = evaluate(FixedScores(scores), dataset, "test", "fixed", candidates=candidates)
    assert report.to_json()["candidate_accuracy"] == pytest.approx(2 / 3) and report.to_json()["candidate_n"] == 3
    assert "Multiple choice" in render_report(report)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"line": 99, "candidates": ["q0", "q1"]}, "line 99 is not a line of"),
        ({"line": 17, "candidates": ["q1", "q2"]}, "the gold quote of line 17 ('q0') is not a candidate"),
        ({"line": 17, "candidates": ["q0"]}, "at least two distinct candidates"),
        ({"line": "17", "candidates": ["q0", "q1"]}, "0-based line number"),
        ({"line": 17, "candidates": "q0 q1"}, "list of non-empty quote texts"),
    ],
)
def test_a_bad_candidate_line_is_reported_with_its_number(write_dataset, tmp_path, line, message):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    path = write_candidates(tmp_path / "c.jsonl", [{"line": 20, "candidates": ["q3", "q0"]}, line])
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        read_candidates(path, dataset)
    assert caught.value.line == 2


DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in Python's parser
LONG = "7" * 5000  # ValueError: more digits than Python converts


@pytest.mark.parametrize(
    ("data", "candidates", "message"),
    [
        ('{"left": "l", "quote": "q0", "right": "r"}\n' + DEEP, None, "data.jsonl:2: JSON nested more than 100 levels"),
        ('{"left": "l", "quote": "q0", "right": "r", "n": ' + LONG + "}", None, "data.jsonl:1 (field 'n'): an integer"),
        (None, '{"line": ' + LONG + ', "candidates": ["q0", "q1"]}', "c.jsonl:1 (field 'line'): an integer of 5,000"),
    ],
    # Short ids: pytest puts the test's id in $PYTEST_CURRENT_TEST, and a 200,000-character one is more than
    # the system lets one environment variable of a child process hold.
    ids=["deep nesting", "long integer", "long integer in candidates"],
)
def test_json_lines_python_cannot_read_are_one_line_naming_file_line_and_field(
    write_dataset, tmp_path, data, candidates, message
):
    args = ["--method", "bm25", "--data", write_dataset(ROWS, SPLITS)]
    if data is not None:
        (tmp_path / "data.jsonl").write_text(data, encoding="utf-8")
        args[3] = tmp_path / "data.jsonl"
    if candidates is not None:
        (tmp_path / "c.jsonl").write_text(candidates, encoding="utf-8")
        args += ["--candidates", tmp_path / "c.jsonl"]
    done = subprocess.run(
        [sys.executable, "-m", "quoter", "evaluate", *map(str, args)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / message}")
