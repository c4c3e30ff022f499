"""Which runtime runs the context encoder, as a setting: kept free of torch and ONNX Runtime so that reading
the settings (the command line) is fast. The choice itself is made in context_runtime.py."""

from __future__ import annotations

from enum import Enum


class ContextRuntime(str, Enum):
    """torch: float32 eager torch; onnx: ONNX Runtime, float32; onnx-int8: ONNX Runtime with int8 weights and
    int8 activations (one scale per token); auto: the fastest whose MRR, measured when it is exported, is at
    most MAX_MRR_LOSS below torch's and whose context vectors, measured then too, move by at most
    MAX_BATCH_DEVIATION between a context encoded alone and beside others (torch on a GPU)."""

    AUTO = "auto"
    TORCH = "torch"
    ONNX = "onnx"
    ONNX_INT8 = "onnx-int8"


MAX_MRR_LOSS = 0.005
# Relative to a vector's largest component: float32 rounding (about 1e-7) passes; a quantization scale shared
# by the contexts of a call (up to 0.1) does not.
MAX_BATCH_DEVIATION = 1e-5
RUNTIME_HELP = (
    f"What runs the context encoder; auto: the fastest whose MRR, measured when it is first exported, is at most "
    f"{MAX_MRR_LOSS} below float32 torch's"
)
