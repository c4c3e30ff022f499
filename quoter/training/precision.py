"""The numbers training computes in: bf16 mixed precision on GPUs that support it (fp16 with loss scaling on
older ones), float32 on a CPU; and, for bf16 on a CPU (run.precision=bf16-mixed, about 1.7 times faster where
the CPU has AMX), the attention that is fast there.

bf16 is not the CPU's default: on the dev sets it trained as well as float32 within the spread of seeds on
modern Chinese, but its fused valid MRR was lower with every seed and set tried (README, "Training speed")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


def auto_precision() -> str:
    """Lightning's precision for run.precision 'auto' on this machine."""
    if torch.cuda.device_count():
        return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
    return "32-true"


@contextlib.contextmanager
def training_attention(module: nn.Module, on_cpu: bool, precision: str) -> Iterator[None]:
    """Within the block, the transformers models in `module` compute attention as plain matrix products
    ('eager') when training in bf16 on a CPU: torch's fused CPU attention computes bf16 gradients several
    times slower than float32 ones, where the plain products run on AMX. Elsewhere nothing changes. The
    models' own choice is restored after the block (inference keeps the fused kernel, fast without gradients)."""
    models = [m for m in module.modules() if hasattr(m, "set_attn_implementation")]
    if not on_cpu or "bf16" not in precision or not models:
        yield
        return
    before = [m.config._attn_implementation for m in models]
    try:
        for model in models:
            model.set_attn_implementation("eager")
        yield
    finally:
        for model, implementation in zip(models, before):
            model.set_attn_implementation(implementation)
