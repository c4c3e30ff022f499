"""Encode many texts in batches of similar length, and run one padded batch in calls of similar length: both
keep padding (wasted CPU time) small."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from quoter.progress import progress_bar

Row = TypeVar("Row")
Batch = TypeVar("Batch")


def encode_rows(
    module: nn.Module,
    rows: Sequence[Row],
    length: Callable[[Row], int],
    collate: Callable[[Sequence[Row]], Batch],
    batch_size: int,
    dim: int,
    progress_label: str | None = None,
) -> np.ndarray:
    """Run `module(collate(batch))` over the rows in batches sorted by length, in eval mode without
    gradients; return float32 vectors of size `dim` in the rows' original order. With a `progress_label`
    ("encoding quotes"), a progress bar counts the rows on a terminal."""
    # Restore each submodule's own mode afterwards: a wrapper's flag says nothing about the model inside it.
    modes = {submodule: submodule.training for submodule in module.modules()}
    module.eval()
    try:
        with torch.inference_mode():
            return encode_in_length_order(
                rows,
                length,
                lambda batch: module(collate(batch)).float().cpu().numpy(),
                batch_size,
                dim,
                progress_label,
            )
    finally:
        for submodule, training in modes.items():
            submodule.training = training


def encode_in_length_order(
    rows: Sequence[Row],
    length: Callable[[Row], int],
    encode_batch: Callable[[Sequence[Row]], np.ndarray],
    batch_size: int,
    dim: int,
    progress_label: str | None = None,
    call_overhead: float | None = None,
) -> np.ndarray:
    """`encode_batch` over the rows in batches sorted by length; float32 vectors of size `dim` in the rows'
    original order, with a progress bar on a terminal when there is a `progress_label`. Batches hold
    `batch_size` rows, or with a `call_overhead` (what one more call costs, in padded tokens) at most that
    many, cut where the padded tokens plus the calls' overhead are fewest (least_padding_calls)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = sorted(range(len(rows)), key=lambda index: length(rows[index]))
    if call_overhead is None:
        ends = list(range(batch_size, len(order), batch_size)) + ([len(order)] if order else [])
    else:
        ends = least_padding_calls([length(rows[index]) for index in order], batch_size, call_overhead)
    outputs: list[np.ndarray] = []
    with progress_bar(total=len(rows), desc=progress_label, enabled=progress_label is not None) as bar:
        for begin, end in zip([0, *ends], ends):
            chunk = order[begin:end]
            outputs.append(encode_batch([rows[index] for index in chunk]))
            bar.update(len(chunk))
    if not outputs:
        return np.zeros((0, dim), dtype=np.float32)
    vectors = np.concatenate(outputs)
    result = np.empty_like(vectors)
    result[order] = vectors
    return result


def least_padding_calls(lengths: Sequence[int], most: int, overhead: float) -> list[int]:
    """Where to cut `lengths` (ascending) into calls of at most `most` rows, each padded to its longest row, so
    that the padded tokens plus `overhead` per call are fewest: the end index of each call, in order."""
    count = len(lengths)
    cost = np.zeros(count + 1)
    cut = np.zeros(count + 1, dtype=np.int64)
    for end in range(1, count + 1):
        starts = np.arange(max(0, end - most), end)
        totals = cost[starts] + overhead + (end - starts) * lengths[end - 1]
        best = int(np.argmin(totals))  # the first of equals: the longest call
        cost[end], cut[end] = totals[best], starts[best]
    ends = []
    end = count
    while end > 0:
        ends.append(end)
        end = int(cut[end])
    return ends[::-1]


def in_length_calls(
    lengths: torch.Tensor, run: Callable[[torch.Tensor, int], torch.Tensor], call_overhead: float
) -> torch.Tensor:
    """One output row per row of a padded batch whose rows have `lengths` tokens: `run(rows, width)` gives those
    of the rows `rows` padded only to `width`, their longest; the batch is cut into calls by length where the
    padded tokens plus `call_overhead` per call are fewest (least_padding_calls), and the calls' outputs come
    back in the batch's order, gradients included. An encoder's rows never see each other, so this is the
    whole batch's output, without most of the padding of a batch drawn at random."""
    order = torch.argsort(lengths, stable=True)
    ordered = lengths[order].tolist()
    ends = least_padding_calls(ordered, len(ordered), call_overhead)
    outputs = [run(order[begin:end], ordered[end - 1]) for begin, end in zip([0, *ends], ends)]
    return torch.cat(outputs)[torch.argsort(order)]
