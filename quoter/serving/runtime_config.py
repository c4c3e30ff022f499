"""Which runtime runs the context encoder, as a setting: kept free of torch and ONNX Runtime so that reading
the settings (the command line) is fast. The choice itself is made in context_runtime.py."""

from __future__ import annotations

from enum import Enum


class ContextRuntime(str, Enum):
    """torch: float32 eager torch; onnx: ONNX Runtime, float32; onnx-int8: ONNX Runtime with dynamically
    quantized int8 weights; auto: the fastest whose MRR, measured when it is exported, is at most
    MAX_MRR_LOSS below torch's (torch on a GPU)."""

    AUTO = "auto"
    TORCH = "torch"
    ONNX = "onnx"
    ONNX_INT8 = "onnx-int8"


MAX_MRR_LOSS = 0.005
