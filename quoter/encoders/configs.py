"""Settings of the encoders, kept free of torch and transformers so that reading them (the command line's
defaults, for one) stays fast."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from quoter.errors import QuoterError

SPECIAL_TOKENS_PER_CONTEXT = 3


class ContextPooling(str, Enum):
    """Which hidden state represents a context."""

    MASK = "mask"
    CLS = "cls"


@dataclass(frozen=True)
class ContextEncoderConfig:
    """max_length: tokens per context, special tokens included; pooling: the [MASK] or the [CLS] state."""

    max_length: int = 128
    pooling: ContextPooling = ContextPooling.MASK

    def __post_init__(self) -> None:
        if self.max_length < SPECIAL_TOKENS_PER_CONTEXT + 1:
            raise QuoterError(f"a context needs max_length >= {SPECIAL_TOKENS_PER_CONTEXT + 1}, got {self.max_length}")


@dataclass(frozen=True)
class QuoteEncoderConfig:
    """max_length: tokens per quote, special tokens included; alpha: weight of the sememe embeddings (Eq. 6;
    the paper tunes it in {0.1, 0.2, 0.5, 1.0, 2.0}; 0 turns sememes off)."""

    max_length: int = 64
    alpha: float = 0.5

    def __post_init__(self) -> None:
        if self.max_length < 3:
            raise QuoterError(f"a quote needs max_length >= 3, got {self.max_length}")
        if self.alpha < 0:
            raise QuoterError(f"alpha must not be negative, got {self.alpha}")
