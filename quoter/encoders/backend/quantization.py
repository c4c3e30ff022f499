"""A faster CPU path for the context encoder: dynamic int8 quantization of its linear layers.

Almost all of a BERT-style encoder's time on a CPU goes into its linear layers (attention projections and
feed-forward blocks). Dynamic quantization stores their weights as int8 and quantizes the activations on
the fly, so no calibration data is needed; embeddings and layer norms stay float32. torch takes one
activation scale over the whole input of a call, padding included, so each context is encoded in a call of
its own: batched, a context's vector moved by up to 22% of its largest component with its neighbours
(all-MiniLM-L6-v2). On one thread, one call per context takes 0.33 of float32 torch's time for one context and
0.39 to 0.45 for batches of 8 or 16, against 0.30 to 0.40 batched. Quantizing each token's activations on its
own (int8 products by torch._int_mm) was about as fast but no cure: torch's float32 rounding before each
quantization differs between batch shapes, and roundings that flipped moved vectors by up to 3%. onnx-int8
quantizes per token too, and there ONNX Runtime's float32 arithmetic measured the same alone and batched
(onnx_export.quantize_onnx_int8).

Weights get one scale per output channel rather than one per matrix: at about the same speed, that keeps the
context vectors of all-MiniLM-L6-v2 much closer to the float ones (mean cosine 0.94 instead of 0.81 on the
example set; the feed-forward output layers, whose inputs have the widest range, lose the most).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.context_encoder import ContextEncoder
from quoter.errors import QuoterError
from quoter.ranking import Query


class Int8ContextEncoder(ContextEncoder):
    """A context encoder whose linear layers are dynamically quantized: it encodes each context in a call of its
    own, so that the activation scale, taken over a call's whole input, is the context's own."""

    def encode(self, queries: Sequence[Query], batch_size: int = ENCODE_BATCH) -> np.ndarray:
        """Context vectors as a float32 array (len(queries), hidden), one call per context whatever
        `batch_size` is."""
        return super().encode(queries, batch_size=1)


def quantize_dynamic_int8(encoder: ContextEncoder) -> Int8ContextEncoder:
    """A context encoder whose model is a dynamically int8-quantized copy of `encoder`'s model.

    Every nn.Linear of the copy gets int8 weights; the original encoder and its model are left untouched.
    The result shares the original's tokenizer and config and runs on the CPU only, in eval mode, one context
    per call (Int8ContextEncoder)."""
    if encoder.model.device.type != "cpu":
        raise QuoterError(f"int8 dynamic quantization runs on the CPU; the model is on {encoder.model.device}")
    model = copy.deepcopy(encoder.model).eval()
    # torch marks its eager quantization API deprecated in favour of torchao, yet it is still the only one
    # that ships with the torch versions Quoter supports (<2.14); the warnings would only be noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*", category=UserWarning)
        quantized = quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
    return Int8ContextEncoder(quantized, encoder.tokenizer, encoder.config)
