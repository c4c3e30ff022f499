"""The settings of `quoter batch`: what ranks (shared with the server) and what each output line holds, each
with its one default, read by quoter.settings like every command's. Light to import."""

from __future__ import annotations

from dataclasses import dataclass, field

from quoter.serving.settings import RecommenderSettings
from quoter.settings import at_least


@dataclass(frozen=True)
class BatchConfig:
    """k: quotes per context; left_only: drop the right context; chunk: contexts written per step."""

    k: int = 10
    left_only: bool = False
    chunk: int = 64

    def __post_init__(self) -> None:
        at_least("k", self.k, 1)
        at_least("chunk", self.chunk, 1)


@dataclass(frozen=True)
class BatchSettings(RecommenderSettings):
    """`quoter batch`: what ranks (see RecommenderSettings) and what each output line holds (see
    BatchConfig)."""

    batch: BatchConfig = field(default_factory=BatchConfig)
