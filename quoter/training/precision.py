"""The numbers training computes in: bf16 mixed precision where the hardware multiplies bf16 matrices fast (GPUs
that support it, and CPUs with AMX, where a bf16 product is about 4 times a float32 one), else float32 (fp16
with loss scaling on older GPUs); and, for bf16 on a CPU, the attention that is fast there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

BF16 = "bf16-mixed"


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU has AMX tiles (Intel Xeon from Sapphire Rapids on), which multiply bf16 matrices in
    hardware; without them bf16 is emulated and slower than float32."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


def auto_precision() -> str:
    """Lightning's precision for run.precision 'auto' on this machine."""
    if torch.cuda.device_count():
        return BF16 if torch.cuda.is_bf16_supported() else "16-mixed"
    return BF16 if cpu_multiplies_bf16() else "32-true"


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
