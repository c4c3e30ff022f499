"""What the processes of a DDP run share: which of them launched the run, how many train together, and the
gathers of a training step. Lightning's all_gather needs a tensor of one shape in every process, so rows of
different counts are padded to the longest first."""

from __future__ import annotations

import os

import numpy as np
import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.utilities import rank_zero_only


def launching_process() -> bool:
    """Whether this process launched the run, before any Trainer exists. Under DDP, Lightning runs the command
    again for each other process of a machine (LOCAL_RANK set, which rank_zero_only reads when imported), and
    every other machine runs it with its NODE_RANK; those processes train alongside the launching one."""
    return rank_zero_only.rank == 0 and int(os.environ.get("NODE_RANK", "0")) == 0


def world_size() -> int:
    """How many processes train together: DDP's process group once Lightning has set it up, else 1."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def wait_for_all() -> None:
    """Under DDP, return once every process got here; at once in a single process."""
    if world_size() > 1:
        dist.barrier()


def gather_ids(module: pl.LightningModule, ids: np.ndarray) -> list[np.ndarray]:
    """Every process's 1-D int64 `ids` (each its own count of them), in rank order, on the host. Every
    process must call this, in the same order as its other collectives."""
    if world_size() == 1:
        return [ids]
    device = module.device
    sizes = module.all_gather(torch.full((), len(ids), dtype=torch.long, device=device)).tolist()
    padded = np.zeros(max(sizes), dtype=np.int64)
    padded[: len(ids)] = ids
    gathered = module.all_gather(torch.from_numpy(padded).to(device)).cpu().numpy()
    return [row[:size] for row, size in zip(gathered, sizes)]


def gather_rows(module: pl.LightningModule, rows: torch.Tensor, width: int) -> torch.Tensor:
    """Every process's `rows`, each padded with zeros to `width` rows, in rank order: (world_size * width, ...),
    rank r's rows from r * width on. The gradient of each gathered row flows back to the process it came from,
    summed over every process's loss."""
    if world_size() == 1:
        return rows
    padding = rows.new_zeros((width - len(rows), *rows.shape[1:]))
    return module.all_gather(torch.cat([rows, padding]), sync_grads=True).flatten(0, 1)
