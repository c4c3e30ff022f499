"""The settings of `quoter batch`: what ranks (shared with the server) and what each output line holds, each
with its one default and its help, read by quoter.settings like every command's. Light to import."""

from __future__ import annotations

from dataclasses import dataclass, field

from quoter.serving.settings import RecommenderConfig
from quoter.settings import at_least, setting


@dataclass(frozen=True)
class BatchOutputConfig:
    """What each output line holds (the top k quotes of its context, ranked with or without the right
    context), and how many contexts are written per step."""

    k: int = setting(10, "Quotes per context")
    left_only: bool = setting(False, "Drop the right context: autocomplete")
    chunk: int = setting(64, "Contexts ranked and written per step")

    def __post_init__(self) -> None:
        at_least("k", self.k, 1)
        at_least("chunk", self.chunk, 1)


@dataclass(frozen=True)
class BatchConfig(RecommenderConfig):
    """`quoter batch`: what ranks (RecommenderConfig) and what each output line holds (BatchOutputConfig)."""

    batch: BatchOutputConfig = field(default_factory=BatchOutputConfig)
