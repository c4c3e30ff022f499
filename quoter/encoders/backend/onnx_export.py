"""The context encoder as an ONNX graph: exported from torch with its pooling (and, for [MASK] pooling, the
gather at the gap), and a copy whose matrix products run in int8, both run by ONNX Runtime.

ONNX Runtime's fused kernels encode a short context several times faster than eager torch on a CPU, and int8
products (weights int8 per output channel, activations int8 per token) faster again.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from quoter.encoders.context_encoder import ContextBatch, ContextEncoder
from quoter.ranking import Query

if TYPE_CHECKING:
    import onnx

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids", "positions")
OUTPUT_NAME = "vectors"
OPSET = 17
# Two contexts of different lengths, so that the traced graph pads and pools as real batches do.
TRACE_CONTEXTS = [Query("the trace context", "of two sides"), Query("short", "")]


class _PooledContext(nn.Module):
    """The context encoder with plain tensors in and out, as an exporter needs it."""

    def __init__(self, encoder: ContextEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
        positions: torch.Tensor,
    ) -> torch.Tensor:
        return self.encoder(ContextBatch(input_ids, attention_mask, token_type_ids, positions))


def export_onnx(encoder: ContextEncoder, path: Path) -> None:
    """Write `encoder` (on the CPU) as an ONNX graph taking INPUT_NAMES (batch and token axes free) and giving
    the pooled context vectors. Inputs the pooling never reads (positions, outside [MASK] pooling) are left
    out of the graph."""
    batch = encoder.prepare(TRACE_CONTEXTS)
    per_token = {0: "batch", 1: "tokens"}
    axes = {**dict.fromkeys(INPUT_NAMES[:3], per_token), "positions": {0: "batch"}, OUTPUT_NAME: {0: "batch"}}
    # The exporter puts the module tree back into the wrapper's mode afterwards: keep every submodule's own.
    modes = {module: module.training for module in encoder.modules()}
    wrapper = _PooledContext(encoder).eval()
    try:
        with warnings.catch_warnings():
            # The TorchScript exporter (the one that needs no extra packages) warns about being traced and
            # about its own deprecation; neither concerns a graph without data-dependent control flow.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                (batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.positions),
                str(path),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    finally:
        for module, training in modes.items():
            module.training = training


def quantize_onnx_int8(source: Path, target: Path) -> None:
    """Write a copy of the graph at `source` whose products with a weight matrix run in int8, and whose
    embedding tables are int8: weights with one scale per output channel, activations with one scale per token.

    A token's scale is taken from that token alone, so a context's vector does not depend on the other contexts
    of its call or on their padding. ONNX Runtime's dynamic quantization, the former onnx-int8, takes one
    scale over a whole call: beside contexts of other lengths, a context's vector moved by up to 30% of its
    largest component (all-MiniLM-L6-v2), and rankings changed with the company a request kept.

    Measured by benchmarks/int8_context_encoder.py against float32 ONNX on 2 threads (all-MiniLM-L6-v2 on 695
    English check contexts / multilingual-e5-small on 200 Chinese glosses; ranges over both models and two
    runs): one context takes 0.74 to 0.76 of float32's time, 8 or 16 contexts together go 1.37 to 1.43 times
    as fast; MRR moves by -0.0019 / -0.0023 from torch float32's, mean cosine 0.9964 / 0.9993. One scale per
    call: 0.65 to 0.67 and 1.61 to 1.74, MRR +0.0045 / +0.0074, cosine 0.9915 / 0.9965. That graph given one
    context per call, which also makes it independent: 0.63 to 0.64 but 0.98 to 1.13, MRR -0.0042 / +0.0022.
    MatMulNBits with int8 blocks of activations (accuracy_level 4), on one thread: 8-bit weights in
    blocks of 32 are independent but 1.4 to 2 times slower than float32, in blocks of 128 not independent;
    4-bit weights lose accuracy (mean cosine 0.964 in blocks of 32) at no gain in speed. Merging the products
    that share an input (query, key and value) into one saved only 3% of one context's time. Earlier choices,
    with one scale per call (change of MRR on 396 English corpus contexts / the 569 English glosses): one scale
    per weight matrix -0.0119 / -0.0067; uint8 weights -0.0016 / +0.0011 at 2.6 times the time; float32
    embeddings a 2.5 times larger file."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The embedding tables alone go through quantize_dynamic: a lookup is per token, so nothing in it depends
    # on the batch. It logs a suggestion to preprocess the graph first on the root logger; that made no
    # measurable difference to these encoders, so the line would only be noise on a server's first start.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["Gather"])
    finally:
        logging.disable(previous)
    model = onnx.load(str(target))
    _int8_products(model.graph)
    if not any(opset.domain == MICROSOFT_DOMAIN for opset in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(MICROSOFT_DOMAIN, 1))
    onnx.save(model, str(target))


MICROSOFT_DOMAIN = "com.microsoft"  # ONNX Runtime's own operators: MatMulIntegerToFloat
# A token's activations divided by their largest magnitude lie in [-1, 1]: in int8 steps of 1/127, stored as
# uint8 around 128 (ONNX Runtime's fast kernels multiply uint8 activations by int8 weights).
UNIT_STEP = 1 / 127
UNIT_ZERO = 128
SMALLEST_PEAK = 1e-30  # an all-zero token divides by this instead of 0


def _int8_products(graph: onnx.GraphProto) -> None:
    """Replace every MatMul by a constant matrix with an int8 product: its input divided by each token's
    largest magnitude, quantized with the fixed step UNIT_STEP, multiplied by the int8 weights
    (MatMulIntegerToFloat) and by that magnitude again. Products sharing an input quantize it once."""
    from onnx import helper, numpy_helper

    weights = {tensor.name: tensor for tensor in graph.initializer}
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(UNIT_STEP, np.float32), "int8/unit_step"),
            numpy_helper.from_array(np.array(UNIT_ZERO, np.uint8), "int8/unit_zero"),
            numpy_helper.from_array(np.array(SMALLEST_PEAK, np.float32), "int8/smallest_peak"),
        ]
    )
    quantized: dict[str, tuple[str, str]] = {}  # input -> (its int8 tokens, their peaks)
    nodes = []
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        source = node.input[0]
        if source not in quantized:
            name = f"int8/tokens{len(quantized)}"
            nodes += [
                helper.make_node("Abs", [source], [f"{name}/abs"]),
                helper.make_node("ReduceMax", [f"{name}/abs"], [f"{name}/largest"], axes=[-1], keepdims=1),
                helper.make_node("Max", [f"{name}/largest", "int8/smallest_peak"], [f"{name}/peak"]),
                helper.make_node("Div", [source, f"{name}/peak"], [f"{name}/unit"]),
                helper.make_node("QuantizeLinear", [f"{name}/unit", "int8/unit_step", "int8/unit_zero"], [name]),
            ]
            quantized[source] = (name, f"{name}/peak")
        tokens, peaks = quantized[source]
        int8, scales = _per_channel_int8(numpy_helper.to_array(weight))
        product = f"int8/{node.output[0]}"
        graph.initializer.extend(
            [numpy_helper.from_array(int8, f"{product}/weight"), numpy_helper.from_array(scales, f"{product}/scale")]
        )
        inputs = [tokens, f"{product}/weight", "int8/unit_step", f"{product}/scale", "int8/unit_zero"]
        nodes += [
            helper.make_node("MatMulIntegerToFloat", inputs, [product], domain=MICROSOFT_DOMAIN),
            helper.make_node("Mul", [product, peaks], [node.output[0]]),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node.input}
    kept = [tensor for tensor in graph.initializer if tensor.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _per_channel_int8(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (inputs, outputs) float matrix as int8 in [-127, 127] and one float32 scale per output column."""
    scales = np.abs(weight).max(axis=0) / 127
    scales[scales == 0] = 1.0  # an all-zero column stays zero
    return np.round(weight / scales).astype(np.int8), scales.astype(np.float32)
