"""The settings of `quoter batch`: what ranks (shared with the server) and what each output line holds, each
with its one default and its help, read by quoter.settings like every command's. Light to import."""

from __future__ import annotations

from dataclasses import dataclass, field

from quoter.errors import QuoterError
from quoter.serving.settings import EngineKind, RecommenderConfig
from quoter.settings import at_least, at_most, setting

# More quotes than anyone reads, or reranks downstream, per context: each is about 200 bytes of output, so
# 1,000 already make a line of some 200 KB; a larger --k is a typo, which would fill the disk.
MAX_K = 1000


@dataclass(frozen=True)
class BatchOutputConfig:
    """What each output line holds (the top k quotes of its context, ranked with or without the right
    context), and how many contexts are written per step."""

    k: int = setting(10, f"Quotes per context (at most {MAX_K:,})")
    left_only: bool = setting(False, "Drop the right context: autocomplete")
    chunk: int = setting(64, "Contexts ranked and written per step")

    def __post_init__(self) -> None:
        at_least("k", self.k, 1)
        at_most("k", self.k, MAX_K)
        at_least("chunk", self.chunk, 1)


@dataclass(frozen=True)
class BatchEngineConfig:
    """What ranks the contexts: this process, or a pool of Ray workers (quoter.batch.ray_job), each ranking
    whole blocks of contexts into shards of the output, on a local Ray cluster or on the one at `address`."""

    kind: EngineKind = setting(
        EngineKind.LOCAL, "local: this process; ray: a pool of Ray workers (pip install 'quoter[scale]')"
    )
    address: str | None = setting(None, "With ray: the Ray cluster to run on, e.g. auto. Default: a local one")
    workers: int = setting(1, "With ray: how many workers rank, each with its own recommender and --threads CPUs")
    gpus_per_worker: float = setting(0.0, "With ray: the GPUs each worker takes (a fraction shares one)")
    block: int = setting(1024, "With ray: contexts per block, ranked into a shard of their own")

    def __post_init__(self) -> None:
        at_least("workers", self.workers, 1)
        at_least("gpus_per_worker", self.gpus_per_worker, 0)
        at_least("block", self.block, 1)
        if self.kind is EngineKind.LOCAL:
            ray_only = {"workers": self.workers > 1, "gpus_per_worker": self.gpus_per_worker, "address": self.address}
            given = [name for name, value in ray_only.items() if value]
            if given:
                raise QuoterError(f"{given[0]}: needs the ray engine (--engine ray)")


@dataclass(frozen=True)
class BatchConfig(RecommenderConfig):
    """`quoter batch`: how it ranks (RecommenderConfig), what each output line holds (BatchOutputConfig) and
    what ranks them (BatchEngineConfig)."""

    batch: BatchOutputConfig = field(default_factory=BatchOutputConfig)
    engine: BatchEngineConfig = field(default_factory=BatchEngineConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        # A block ranked in the single-process run's steps gives the same bytes: a context's vector may
        # differ in its last bits with the contexts encoded beside it.
        if self.engine.kind is EngineKind.RAY and self.engine.block % self.batch.chunk:
            raise QuoterError(
                f"engine.block: must be a multiple of batch.chunk ({self.batch.chunk}), got {self.engine.block}"
            )
