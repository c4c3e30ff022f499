"""A context encoder run by ONNX Runtime: the same tokenization and the same vectors (up to rounding, or
int8 quantization) as the torch ContextEncoder it was exported from (onnx_export.py), faster on a CPU. A
context's vector is the same whichever contexts share its call (context_runtime.py measures it at export)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from quoter.encoders.backend.onnx_export import INPUT_NAMES
from quoter.encoders.batching import encode_in_length_order
from quoter.encoders.configs import ENCODE_BATCH, ContextEncoderConfig
from quoter.encoders.context_encoder import ContextBatch, ContextEncoder, ContextRow
from quoter.ranking import Query


class OnnxContextEncoder:
    """Encodes contexts with an ONNX graph of `encoder`; `encoder` still tokenizes them."""

    def __init__(self, encoder: ContextEncoder, graph: Path) -> None:
        """`graph`: an ONNX file written by export_onnx (or its int8 copy) from this encoder."""
        import onnxruntime

        self.config: ContextEncoderConfig = encoder.config
        self._encoder = encoder
        options = onnxruntime.SessionOptions()
        # One thread setting for every runtime: the count torch was given (quoter.cli.serve_commands.set_threads).
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        # Idle threads sleep rather than spin: on a CPU shared with the server's event loop, its clients or other
        # work, spinning threads took turns with them and a call ran several times slower.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self._inputs = {node.name for node in self._session.get_inputs()}
        self._dim = encoder.model.config.hidden_size

    def _run(self, rows: Sequence[ContextRow]) -> np.ndarray:
        batch: ContextBatch = self._encoder.collate(rows)
        tensors = (batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.positions)
        feeds = {name: tensor.numpy() for name, tensor in zip(INPUT_NAMES, tensors) if name in self._inputs}
        return self._session.run(None, feeds)[0].astype(np.float32, copy=False)

    def encode_together(self, queries: Sequence[Query]) -> np.ndarray:
        """The contexts' vectors from one call, padded to the longest of them (`encode` instead cuts calls that
        pad little): what the check that a vector does not depend on its neighbours compares."""
        return self._run(self._encoder.rows(queries))

    def encode(self, queries: Sequence[Query], batch_size: int = ENCODE_BATCH) -> np.ndarray:
        """Context vectors as a float32 array (len(queries), hidden): the contexts sorted by length and run in
        calls of at most `batch_size` that pad as little as they cost (batching.least_padding_calls)."""
        rows = self._encoder.rows(queries) if queries else []
        return encode_in_length_order(
            rows, lambda row: len(row.input_ids), self._run, batch_size, self._dim, call_overhead=CALL_OVERHEAD
        )


# What one more call costs, in tokens: ONNX Runtime took 0.9 ms a call plus 0.085 ms a (padded) token for
# all-MiniLM-L6-v2 in int8 on one CPU thread, so a batch of 8 short contexts of 13 to 27 tokens (216 tokens
# padded, 161 not) ran in two or three calls about 10% faster than in one.
CALL_OVERHEAD = 10
