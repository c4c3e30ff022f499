"""The settings of `quoter evaluate`, each with its one default, read by quoter.settings from `--config
FILE.yaml`, `--set key=value` and the command's options. Inputs and outputs (the data, splits, glosses,
candidates, metrics and plot files) are options only."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.errors import QuoterError
from quoter.evaluation.evaluate import RANK_BATCH
from quoter.languages import Language
from quoter.methods import METHODS, MethodOptions
from quoter.settings import at_least


class Split(str, Enum):
    TEST = "test"
    VALID = "valid"


@dataclass(frozen=True)
class EvaluateSettings(MethodOptions):
    """The method and its options (MethodOptions), except that lang None takes the official part's language,
    else guesses it from the quotes, and runtime chooses the fastest (auto); split: whose contexts are
    ranked; left_only: drop the right context; batch_size: contexts scored at once."""

    lang: Language | None = None  # type: ignore[assignment]  # chosen before the method is built
    runtime: ContextRuntime = ContextRuntime.AUTO
    method: str = "bm25"
    split: Split = Split.TEST
    left_only: bool = False
    batch_size: int = RANK_BATCH

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise QuoterError(f"method: unknown method '{self.method}'; known methods: {', '.join(METHODS)}")
        at_least("batch_size", self.batch_size, 1)
