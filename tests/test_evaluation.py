"""Evaluation ranks against the full quote set, averages over contexts, and reports subsets."""

import numpy as np
import pytest

from quoter.datasets import load_dataset
from quoter.errors import InputError
from quoter.evaluation import evaluate, render_report
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
