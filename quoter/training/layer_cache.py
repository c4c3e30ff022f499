"""The frozen bottom's output for every context of a split, computed once and kept (model.freeze_layers with
model.cache_frozen_layers): a context's tokens never change and neither do the frozen layers, so training runs
only the trainable top over the kept states, which gives the same vectors as running the whole model (in
float32; under bf16 mixed precision the kept states are the float32 ones, which the bottom run each step would
compute in bf16).

The states of all contexts lie one after the other in one float32 file, memory-mapped: the operating system
keeps it in memory when it fits and reads it from disk when it does not. The file is named by a hash of what
the states depend on (the frozen weights, the layer count, every context's tokens, torch's version), so a
changed setting never reads stale states, and a resumed run or the next stage reuses them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import xxhash

from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.context_encoder import ContextEncoder, ContextRow
from quoter.encoders.frozen_layers import frozen_modules
from quoter.progress import progress_bar

SUFFIX = ".f32"


def cache_key(encoder: ContextEncoder, rows: Sequence[ContextRow]) -> str:
    """A hash of everything the kept states depend on."""
    digest = xxhash.xxh3_128()
    digest.update(f"{torch.__version__} {encoder.frozen_layers} {len(rows)}".encode())
    for module in frozen_modules(encoder.model, encoder.frozen_layers):
        for name, tensor in module.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    for row in rows:
        digest.update(np.asarray(row.input_ids, dtype=np.int64).tobytes())
        digest.update(np.asarray(row.token_type_ids, dtype=np.int64).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class LayerCache:
    """The kept states of a split's contexts: `states` (tokens, hidden), row i at offsets[i]:offsets[i + 1]."""

    states: np.ndarray
    offsets: np.ndarray

    @classmethod
    def build(
        cls, encoder: ContextEncoder, rows: Sequence[ContextRow], folder: Path, batch_size: int = ENCODE_BATCH
    ) -> LayerCache:
        """The kept states of `rows` in `folder`, computed first if no file there holds them."""
        lengths = np.array([len(row.input_ids) for row in rows], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        shape = (int(offsets[-1]), encoder.model.config.hidden_size)
        path = Path(folder) / f"{cache_key(encoder, rows)}{SUFFIX}"
        if not path.is_file() or path.stat().st_size != 4 * shape[0] * shape[1]:
            _write_states(encoder, rows, offsets, shape, path, batch_size)
        return cls(np.memmap(path, dtype=np.float32, mode="r", shape=shape), offsets)

    def padded(self, indices: Sequence[int], width: int) -> torch.Tensor:
        """The states of rows `indices`, zero-padded to `width` tokens: (len(indices), width, hidden)."""
        batch = torch.zeros(len(indices), width, self.states.shape[1])
        for slot, index in enumerate(indices):
            begin, end = self.offsets[index], self.offsets[index + 1]
            batch[slot, : end - begin] = torch.from_numpy(np.array(self.states[begin:end]))
        return batch


def _write_states(
    encoder: ContextEncoder,
    rows: Sequence[ContextRow],
    offsets: np.ndarray,
    shape: tuple[int, int],
    path: Path,
    batch_size: int,
) -> None:
    """Compute the states in batches of similar length and write them, under a name of this process's own
    that is renamed into place at the end: a crash leaves no partial file, and DDP ranks that build the same
    cache at once each write a whole one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    order = np.argsort([len(row.input_ids) for row in rows], kind="stable")
    try:
        states = np.memmap(partial, dtype=np.float32, mode="w+", shape=shape)
        with torch.inference_mode(), progress_bar(total=len(rows), desc="keeping the frozen layers' output") as bar:
            for begin in range(0, len(order), batch_size):
                chosen = order[begin : begin + batch_size]
                batch = encoder.collate([rows[index] for index in chosen])
                computed = encoder.bottom_states(batch).float().cpu().numpy()
                for slot, index in enumerate(chosen):
                    start, end = offsets[index], offsets[index + 1]
                    states[start:end] = computed[slot, : end - start]
                bar.update(len(chosen))
        states.flush()
        del states
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
