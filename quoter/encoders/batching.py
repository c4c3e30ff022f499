"""Encode many texts in batches of similar length, which keeps padding (wasted CPU time) small."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import torch
from torch import nn

Row = TypeVar("Row")
Batch = TypeVar("Batch")


def encode_rows(
    module: nn.Module,
    rows: Sequence[Row],
    length: Callable[[Row], int],
    collate: Callable[[Sequence[Row]], Batch],
    batch_size: int,
    dim: int,
) -> np.ndarray:
    """Run `module(collate(batch))` over the rows in batches sorted by length, in eval mode without
    gradients; return float32 vectors of size `dim` in the rows' original order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = sorted(range(len(rows)), key=lambda index: length(rows[index]))
    outputs: list[np.ndarray] = []
    # Restore each submodule's own mode afterwards: a wrapper's flag says nothing about the model inside it.
    modes = {submodule: submodule.training for submodule in module.modules()}
    module.eval()
    try:
        with torch.inference_mode():
            for begin in range(0, len(order), batch_size):
                batch = collate([rows[index] for index in order[begin : begin + batch_size]])
                outputs.append(module(batch).float().cpu().numpy())
    finally:
        for submodule, training in modes.items():
            submodule.training = training
    if not outputs:
        return np.zeros((0, dim), dtype=np.float32)
    vectors = np.concatenate(outputs)
    result = np.empty_like(vectors)
    result[order] = vectors
    return result
