"""Evaluation results as readable tables, the way the paper's Table 2 and Figure 2 present them."""

from __future__ import annotations

from typing import Any

from quoter.evaluation.evaluate import EvaluationReport
from quoter.tables import markdown_table

HEADERS = ["contexts", "MRR", "NDCG@5", "R@1", "R@10", "R@100", "median/mean/std rank"]


def _metric_cells(metrics: dict[str, Any]) -> list[str]:
    """Recalls as percentages, as in the paper."""
    return [
        f"{metrics['n']:,}",
        f"{metrics['mrr']:.3f}",
        f"{metrics['ndcg@5']:.3f}",
        f"{100 * metrics['recall@1']:.2f}",
        f"{100 * metrics['recall@10']:.2f}",
        f"{100 * metrics['recall@100']:.2f}",
        f"{metrics['median_rank']:g}/{metrics['mean_rank']:.0f}/{metrics['rank_std']:.0f}",
    ]


def render_report(report: EvaluationReport) -> str:
    """The overall and zero-shot metrics, then the metrics by the gold quote's number of training contexts."""
    context = "left context only" if report.left_only else "left and right context"
    rows = [["all", *_metric_cells(report.overall)]]
    if report.zero_shot is not None:
        rows.append(["zero-shot quotes", *_metric_cells(report.zero_shot)])
    bucket_rows = [[b["train_contexts"], f"{b['quotes']:,}", *_metric_cells(b)] for b in report.buckets]
    choice = report.candidate_metrics()
    choice_lines = (
        [
            f"Multiple choice: the gold quote beat its other candidates for {choice['candidate_accuracy']:.1%} of "
            f"{choice['candidate_n']:,} contexts.",
            "",
        ]
        if choice
        else []
    )
    return "\n".join(
        [
            f"{report.method} on {report.split} ({context}), ranking all {report.quotes:,} quotes",
            "",
            markdown_table(["", *HEADERS], rows),
            "",
            *choice_lines,
            "By the gold quote's number of training contexts:",
            "",
            markdown_table(["train contexts", "quotes", *HEADERS], bucket_rows),
        ]
    )
