"""A context encoder run by ONNX Runtime: the same tokenization and the same vectors (up to rounding, or
int8 quantization) as the torch ContextEncoder it was exported from (onnx_export.py), faster on a CPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from quoter.encoders.configs import ENCODE_BATCH, ContextEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder, ContextRow
from quoter.encoders.onnx_export import INPUT_NAMES
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
        self._pad = encoder.tokenizer.pad_token_id

    def _run(self, rows: Sequence[ContextRow]) -> np.ndarray:
        return self._session.run(None, self._feeds(rows))[0].astype(np.float32, copy=False)

    def _feeds(self, rows: Sequence[ContextRow]) -> dict[str, np.ndarray]:
        """The graph's inputs for these rows: the same padded batch as ContextEncoder.collate, built in numpy
        rather than torch (5 instead of 43 microseconds for one context)."""
        width = max(len(row.input_ids) for row in rows)
        ids = np.full((len(rows), width), self._pad, dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            ids[index, : len(row.input_ids)] = row.input_ids
            types[index, : len(row.input_ids)] = row.token_type_ids
            mask[index, : len(row.input_ids)] = 1
        positions = np.array([row.position for row in rows], dtype=np.int64)
        arrays = (ids, mask, types, positions)
        return {name: array for name, array in zip(INPUT_NAMES, arrays) if name in self._inputs}

    def encode(self, queries: Sequence[Query], batch_size: int = ENCODE_BATCH) -> np.ndarray:
        """Context vectors as a float32 array (len(queries), hidden): the contexts sorted by length and run in
        calls of at most `batch_size` that pad as little as they cost (least_padding_calls)."""
        rows = self._encoder.rows(queries) if queries else []
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not rows:
            return np.zeros((0, self._dim), dtype=np.float32)
        order = sorted(range(len(rows)), key=lambda index: len(rows[index].input_ids))
        lengths = [len(rows[index].input_ids) for index in order]
        vectors = np.empty((len(rows), self._dim), dtype=np.float32)
        start = 0
        for end in least_padding_calls(lengths, batch_size, CALL_OVERHEAD_TOKENS):
            chunk = order[start:end]
            vectors[chunk] = self._run([rows[index] for index in chunk])
            start = end
        return vectors


# What one more call costs, in tokens: ONNX Runtime took 0.9 ms a call plus 0.085 ms a (padded) token for
# all-MiniLM-L6-v2 in int8 on one CPU thread, so a batch of 8 short contexts of 13 to 27 tokens (216 tokens
# padded, 161 not) ran in two or three calls about 10% faster than in one.
CALL_OVERHEAD_TOKENS = 10


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
