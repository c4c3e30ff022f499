"""`quoter evaluate --plot`: the gold-rank distribution and MRR by training frequency, as a PNG."""

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
        ("folder", "is a folder; give the plot a file name"),
        ("plot.pdf", "the plot is a PNG image"),
        ("a-file/plot.png", "is not a writable folder"),
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
