"""`quoter evaluate --plot`: the gold-rank distribution and MRR by training frequency, as a PNG."""

import json
import os
import resource
import signal
import stat
import subprocess
import sys

import pytest
from matplotlib.image import imread

from quoter.cli import main
from quoter.datasets import load_dataset
from quoter.evaluation import evaluate
from quoter.evaluation.plot import DOTS_PER_INCH, FIGURE_INCHES, draw_report
from tests.test_evaluation import ROWS, SPLITS, FixedScores


def evaluate_command(monkeypatch, capsys, *args):
    """Run `quoter evaluate` in this process as a user would; return the exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", ["quoter", "evaluate", *map(str, args)])
    with pytest.raises(SystemExit) as stopped:
        main()
    captured = capsys.readouterr()
    return stopped.value.code, captured.out, captured.err


def test_the_plot_is_a_png_of_the_set_size_with_something_drawn(tmp_path, monkeypatch, capsys):
    plot = tmp_path / "plots" / "bm25.png"  # its folder does not exist yet
    status, _, err = evaluate_command(monkeypatch, capsys, "--method", "bm25", "--plot", plot)
    assert status == 0, err
    assert f"plot written to {plot}" in err
    image = imread(plot)
    width, height = FIGURE_INCHES
    assert image.shape[:2] == (round(height * DOTS_PER_INCH), round(width * DOTS_PER_INCH))
    background = image[0, 0]
    assert (image != background).any(axis=-1).mean() > 0.02  # not one flat colour


def test_the_panels_show_the_ranks_and_the_mrr_of_each_frequency_bucket(write_dataset):
    dataset = load_dataset(write_dataset(ROWS, SPLITS))
    scores = [[9, 1, 2, 3], [5, 1, 3, 0], [0, 8, 7, 1], [4, 4, 4, 4]]  # gold ranks 1, 3, 2 and 4
    report = evaluate(FixedScores(scores), dataset, "test", "fixed")
    ranks_axes, buckets_axes = draw_report(report).axes
    assert sum(bar.get_height() for bar in ranks_axes.patches) == len(report.ranks)
    assert [bar.get_height() for bar in buckets_axes.patches] == [bucket["mrr"] for bucket in report.buckets]
    assert [label.get_text() for label in buckets_axes.get_xticklabels()] == ["0", "1-2", "3-5", "11-20"]


@pytest.mark.parametrize(
    "name, message",
    [
        ("folder", "is a folder; give --plot a file name"),
        ("plot.pdf", "the plot is a PNG image"),
        ("a-file/plot.png", "a-file is not a folder"),
    ],
)
def test_a_bad_plot_path_is_one_line_before_any_ranking(tmp_path, monkeypatch, capsys, name, message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "a-file").write_text("not a folder")
    status, out, err = evaluate_command(monkeypatch, capsys, "--method", "bm25", "--plot", tmp_path / name)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path / name}: ") and message in lines[0]
    assert not out  # nothing was ranked


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_metrics_and_the_plot_are_as_readable_as_the_umask_lets_files_be(tmp_path, monkeypatch, capsys, umask_022):
    out, plot = tmp_path / "metrics.json", tmp_path / "ranks.png"
    status, _, err = evaluate_command(monkeypatch, capsys, "--method", "bm25", "--out", out, "--plot", plot)
    assert status == 0, err
    # Written through temporary files, which mkstemp made 0600.
    assert stat.S_IMODE(out.stat().st_mode) == stat.S_IMODE(plot.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("option", "name"), [("--out", "data.txt"), ("--plot", "data.png"), ("--out", "missing/../data.txt")]
)
def test_an_output_that_is_an_input_is_refused_before_any_ranking(
    write_dataset, tmp_path, monkeypatch, capsys, option, name
):
    data = write_dataset(ROWS, SPLITS)
    if name == "data.png":
        (tmp_path / name).symlink_to(data)
    kept = data.read_bytes()
    status, out, err = evaluate_command(
        monkeypatch, capsys, "--method", "bm25", "--data", data, option, tmp_path / name
    )
    assert status == 2 and not out
    assert err.strip().splitlines() == [
        f"error: {tmp_path / name}: {option} would overwrite the --data file; give another file name"
    ]
    assert data.read_bytes() == kept


def test_a_report_the_disk_refuses_is_one_line_and_leaves_no_file(tmp_path):
    # A file size limit far below the report: its write fails at the very end, after the ranking.
    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    data, splits, out = tmp_path / "data.txt", tmp_path / "splits.json", tmp_path / "report.json"
    data.write_text("".join(f"{left}\t{quote}\t{right}\n" for left, quote, right in ROWS), encoding="utf-8")
    splits.write_text(json.dumps(SPLITS), encoding="utf-8")
    command = [sys.executable, "-m", "quoter", "evaluate", "--method", "bm25", "--data", str(data)]
    command += ["--splits", str(splits), "--out", str(out)]
    ran = subprocess.run(command, capture_output=True, text=True, preexec_fn=limit_files)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last == f"error: {out}: could not write it (File too large); it was left as it was"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data.txt", "splits.json"]
