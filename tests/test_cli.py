"""The `quoter` command as a user runs it: readable tables, a metrics file, one-line errors."""

import json
import re
import subprocess
import sys

import pytest

from tests.test_baselines import planted_rows


def quoter(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "quoter", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def planted(write_dataset):
    return write_dataset(planted_rows(), {"train": [0, 18], "valid": [18, 24], "test": [24, 30]})


@pytest.mark.parametrize("method", ["bm25", "crm"])
def test_evaluate_prints_a_table_and_writes_the_metrics(planted, tmp_path, method):
    out = tmp_path / "metrics.json"
    result = quoter("evaluate", "--method", method, "--data", str(planted), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"{method} on test (left and right context), ranking all 6 quotes" in result.stdout
    metrics = json.loads(out.read_text())
    assert {
        "mrr",
        "ndcg@5",
        "recall@1",
        "recall@10",
        "recall@100",
        "median_rank",
        "mean_rank",
        "rank_std",
        "n",
        "method",
        "split",
        "quotes",
    } <= set(metrics)
    assert (metrics["method"], metrics["split"], metrics["quotes"], metrics["n"]) == (method, "test", 6, 6)
    assert metrics["mrr"] == 1.0


def test_evaluate_valid_split_and_left_only(write_dataset, tmp_path):
    rows = planted_rows()
    # Each valid context gets the next one's left side: by that side alone, BM25 gives the gold quote no score,
    # so it ranks last of the 6 quotes (ties count against it); by both sides, or in test, it ranks near the top.
    rows[18:24] = [(rows[18 + (i + 1) % 6][0], quote, right) for i, (_, quote, right) in enumerate(rows[18:24])]
    data = write_dataset(rows, {"train": [0, 18], "valid": [18, 24], "test": [24, 30]})
    out = tmp_path / "m.json"
    result = quoter("evaluate", "--data", str(data), "--split", "valid", "--left-only", "--out", str(out))
    assert result.returncode == 0, result.stderr
    metrics = json.loads(out.read_text())
    assert metrics["split"] == "valid" and metrics["left_only"] is True
    assert (metrics["n"], metrics["mean_rank"], metrics["mrr"]) == (6, 6.0, pytest.approx(1 / 6))


def test_evaluate_runs_on_the_built_in_example_without_arguments():
    result = quoter("evaluate", "--method", "crm")
    assert result.returncode == 0, result.stderr
    assert "ranking all 27 quotes" in result.stdout
    assert "built-in example set" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["evaluate", "--data", "missing.txt"], "missing.txt: data file not found"),
        (["evaluate", "--method", "magic"], "unknown method 'magic'"),
        (["evaluate", "--data", "{bad}"], "{bad}:2: expected 3 tab-separated fields"),
        (["evaluate", "--data", "{planted}", "--part", "english"], "official 'english' part needs more"),
        (["data", "stats", "{planted}", "{planted}", "--splits", "x.json"], "--splits belongs to one data file"),
        # Refused before the data is even read, so never after an evaluation.
        (["evaluate", "--data", "{bad}", "--out", "."], ".: is a folder; give --out a file name"),
        (["evaluate", "--method", "bundle", "--bundle", "{bad}"], "bad.txt: not a Quoter bundle: a file there"),
        # Under a file no bundle folder can be made: that was a traceback once the training was done.
        (["train", "--data", "{planted}", "--output", "{bad}/sub"], "cannot write --output here: {bad} is not a"),
    ],
)
def test_bad_input_is_one_clear_line_and_no_traceback(planted, tmp_path, args, message):
    bad = tmp_path / "bad.txt"
    bad.write_text("a\tb\tc\nonly\ttwo\n")
    args = [a.format(bad=bad, planted=planted) for a in args]
    result = quoter(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert message.format(bad=bad) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


def test_data_stats_prints_tables_1_and_4(planted):
    result = quoter("data", "stats", str(planted))
    assert result.returncode == 0, result.stderr
    assert "| pairs/quotes | 18/6  | 6/6   | 6/6  | 30/6  |" in result.stdout
    assert "Zero-shot quotes (in valid or test, never in train): 0" in result.stdout
    assert "| #quotes          | 6      |" in result.stdout


def test_evaluate_with_candidates_reports_the_multiple_choice_accuracy(planted, tmp_path):
    # Test lines 24-29; the candidates of line 24 include quotes the file does not have, one of which (the key
    # words of its context alone, in a shorter quote) BM25 ranks above the gold quote. Line 25's gold quote wins.
    lines = [
        {"line": 24, "candidates": ["a rolling stone gathers no moss", "moss grows on a stone", "stone moss rolling"]},
        {"line": 25, "candidates": ["knowledge itself is power", "fortune favours the brave"]},
    ]
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "metrics.json"
    result = quoter(
        "evaluate", "--method", "bm25", "--data", str(planted), "--candidates", str(candidates), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "ranking all 6 quotes" in result.stdout and "Multiple choice" in result.stdout
    metrics = json.loads(out.read_text())
    assert metrics["candidate_n"] == 2 and metrics["quotes"] == 6 and metrics["candidate_accuracy"] == 0.5
    candidates.write_text(json.dumps({"line": 24, "candidates": ["fortune favours the brave", "x"]}) + "\n")
    bad = quoter("evaluate", "--method", "bm25", "--data", str(planted), "--candidates", str(candidates))
    assert bad.returncode == 2 and "candidates.jsonl:1" in bad.stderr and "Traceback" not in bad.stderr


def test_evaluate_hybrid_fits_its_fusion_on_valid_and_reports_it(planted, tmp_path):
    from tests.training_fixtures import write_model

    model = write_model(tmp_path / "model")
    out = tmp_path / "m.json"
    result = quoter("evaluate", "--method", "hybrid", "--data", str(planted), "--model", str(model), "--out", str(out))
    assert result.returncode == 0, result.stderr
    # The tiny model is untrained noise, while CRM finds every planted context: the fit must lean on CRM.
    crm_weight = re.search(r"fusion \(zscore: dense 1, bm25 [0-9.]+, crm ([0-9.]+), knn [0-9.]+\)", result.stderr)
    assert crm_weight is not None and float(crm_weight.group(1)) > 0
    assert json.loads(out.read_text())["mrr"] == 1.0
