"""How quotes are searched, kept apart from faiss so that reading the settings (the command line) is fast."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class IndexKind(str, Enum):
    """Exact search scans every quote; IVF scans the `nprobe` clusters nearest to the query."""

    EXACT = "exact"
    IVF = "ivf"


@dataclass(frozen=True)
class IndexConfig:
    """kind: exact or approximate search; nlist: IVF clusters (0: about 4 * sqrt(quotes)); nprobe: IVF
    clusters searched per query; gpu: search on the GPU when faiss has one."""

    kind: IndexKind = IndexKind.EXACT
    nlist: int = 0
    nprobe: int = 16
    gpu: bool = True
