"""Tiny encoders whose linear layers shape their output, so that quantizing them visibly changes vectors."""

from __future__ import annotations

import torch
from torch import nn


def loud_weights(model: nn.Module, seed: int = 1) -> nn.Module:
    """Redraw `model`'s linear and embedding weights, in place, at a scale where the linear layers shape the
    output; returns the model.

    At BERT's initial scale (std 0.02) the residual stream carries the embeddings through almost unchanged:
    every context of the tiny model gets nearly the same vector (cosine 0.999998 for [MASK] and [CLS]
    pooling), and quantizing the linear layers changes nothing a test could tell from noise."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=module.in_features**-0.5)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=1.0)
    return model
