"""Evaluation: rank every context of a split against the full quote set and report the paper's metrics."""

from quoter.evaluation.evaluate import FREQUENCY_BUCKETS, EvaluationReport, evaluate, rank_samples
from quoter.evaluation.report import render_report

__all__ = ["FREQUENCY_BUCKETS", "EvaluationReport", "evaluate", "rank_samples", "render_report"]
