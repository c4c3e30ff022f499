"""The settings of `quoter evaluate`, each with its one default, read by quoter.settings from `--config
FILE.yaml`, `--set key=value` and the command's options. Inputs and outputs (the data, splits, glosses,
candidates, metrics and plot files) are options only."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quoter.encoders.backend.runtime_config import RUNTIME_HELP, ContextRuntime
from quoter.errors import QuoterError
from quoter.evaluation.evaluate import RANK_BATCH
from quoter.languages import Language
from quoter.methods import METHODS, MethodOptions
from quoter.settings import at_least, setting


class Split(str, Enum):
    TEST = "test"
    VALID = "valid"


@dataclass(frozen=True)
class EvaluateConfig(MethodOptions):
    """The method and its options (MethodOptions), except that lang None takes the official part's language,
    else guesses it from the quotes, and runtime chooses the fastest (auto); which split is ranked, and how."""

    lang: Language | None = setting(  # type: ignore[assignment]  # chosen before the method is built
        None, "Language for lexical methods. Default: the part's language, else guessed from the quotes"
    )
    runtime: ContextRuntime = setting(ContextRuntime.AUTO, RUNTIME_HELP)
    method: str = setting("bm25", f"Recommendation method: {', '.join(METHODS)}")
    split: Split = setting(Split.TEST, "Which split's contexts to rank")
    left_only: bool = setting(False, "Drop the right context: autocomplete, the paper's Appendix B")
    batch_size: int = setting(RANK_BATCH, "Contexts scored at once")

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise QuoterError(f"method: unknown method '{self.method}'; known methods: {', '.join(METHODS)}")
        at_least("batch_size", self.batch_size, 1)
