"""How quotes are searched, kept apart from faiss so that reading the settings (the command line) is fast."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quoter.errors import QuoterError
from quoter.settings import setting


class IndexKind(str, Enum):
    """Exact search scans every quote; IVF scans the `nprobe` clusters nearest to the query."""

    EXACT = "exact"
    IVF = "ivf"


@dataclass(frozen=True)
class IndexConfig:
    """kind: exact or approximate search; nlist: IVF clusters (0: about 4 * sqrt(quotes)); nprobe: IVF
    clusters searched per query; gpu: search on the GPU when faiss has one.

    The softmax normaliser is exact with the exact index. With IVF it is estimated, so that a search never
    scans every quote: the `normalizer_head` best quotes IVF finds count exactly, the others through a
    fixed uniform sample of `normalizer_sample` quotes (exact again when the quote set is not larger)."""

    kind: IndexKind = setting(IndexKind.EXACT, "Quote search: exact, or approximate (IVF) for very large quote sets")
    nlist: int = 0
    nprobe: int = 16
    gpu: bool = True
    normalizer_head: int = 1024
    normalizer_sample: int = 16384

    def __post_init__(self) -> None:
        if self.nprobe < 1 or self.nlist < 0:
            raise QuoterError(f"index: nprobe must be at least 1 and nlist at least 0, got {self.nprobe}, {self.nlist}")
        if not 0 < self.normalizer_head < self.normalizer_sample:
            raise QuoterError("index: the normaliser's head must be positive and smaller than its sample")
