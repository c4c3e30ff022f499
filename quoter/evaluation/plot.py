"""An evaluation at a glance, as a PNG: where the gold quotes rank, and MRR by the gold quote's number of
training contexts (the paper's Figure 2)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from quoter.atomic_files import check_output_file, write_bytes_atomic
from quoter.errors import InputError
from quoter.evaluation.evaluate import EvaluationReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_SUFFIX = ".png"
FIGURE_INCHES = (11.0, 4.5)
DOTS_PER_INCH = 100
# Rank bins grow geometrically, so rank 1, the top 10 and the long tail are all readable.
RANK_BINS = 30


def check_plot_path(path: Path) -> None:
    """Refuse, before any work, a plot path that is not a .png file name in a folder that can be written."""
    check_output_file(path, "--plot")
    if path.suffix.lower() != PLOT_SUFFIX:
        raise InputError(f"the plot is a PNG image: give a file name ending in {PLOT_SUFFIX}", path=path)


def rank_bin_edges(quotes: int) -> np.ndarray:
    """Integer bin edges from rank 1 to past the last rank, about evenly spaced on a log scale."""
    return np.unique(np.geomspace(1, quotes + 1, RANK_BINS + 1).round().astype(np.int64))


def draw_report(report: EvaluationReport) -> Figure:
    """Two panels: the histogram of gold ranks (log rank axis) and MRR per training-frequency bucket."""
    # Imported here: matplotlib takes longer to import than the rest of the command line.
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=FIGURE_INCHES, dpi=DOTS_PER_INCH, layout="constrained")
    ranks_axes, buckets_axes = figure.subplots(1, 2)
    context = "left context only" if report.left_only else "left and right context"
    figure.suptitle(
        f"{report.method} on {report.split} ({context}): MRR {report.overall['mrr']:.3f} over "
        f"{report.overall['n']:,} contexts, {report.quotes:,} quotes"
    )

    ranks_axes.hist(report.ranks, bins=rank_bin_edges(report.quotes), color="tab:blue")
    ranks_axes.set_xscale("log")
    ranks_axes.axvline(report.overall["median_rank"], color="tab:red", linestyle="--", label="median rank")
    ranks_axes.set_xlabel("rank of the gold quote (1 is best)")
    ranks_axes.set_ylabel("contexts")
    ranks_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    ranks_axes.set_title("Where the gold quote ranks")
    ranks_axes.legend()

    labels = [bucket["train_contexts"] for bucket in report.buckets]
    bars = buckets_axes.bar(labels, [bucket["mrr"] for bucket in report.buckets], color="tab:green")
    buckets_axes.bar_label(bars, labels=[f"n={bucket['n']:,}" for bucket in report.buckets], fontsize="small")
    buckets_axes.axhline(report.overall["mrr"], color="tab:red", linestyle="--", label="MRR of all contexts")
    buckets_axes.set_ylim(0, 1.05)
    buckets_axes.set_xlabel("training contexts of the gold quote (0: zero-shot)")
    buckets_axes.set_ylabel("MRR")
    buckets_axes.set_title("MRR by the gold quote's training frequency")
    buckets_axes.legend()
    return figure


def write_plot(report: EvaluationReport, path: Path) -> None:
    """Draw the report with matplotlib's Agg renderer and write it to `path` as a PNG, atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    image = io.BytesIO()
    FigureCanvasAgg(draw_report(report)).print_png(image)
    write_bytes_atomic(path, image.getvalue())
