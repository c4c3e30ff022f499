"""Settings of the encoders, kept free of transformers so that reading them (the command line's defaults, for
one) stays light."""

from __future__ import annotations

from dataclasses import dataclass

from quoter.encoders.pooling import PAPER_POOLING, GapMarker, Pooling, PoolingMode
from quoter.errors import QuoterError

SPECIAL_TOKENS_PER_CONTEXT = 3
# Texts per encoder forward pass, when a caller does not choose.
ENCODE_BATCH = 32
# What one more call of the context encoder costs in a training step, in padded tokens (batching.in_length_calls):
# the fastest of 0 to 128 for zh-offline's steps on a 2-core CPU.
TRAINING_CALL_OVERHEAD = 64


@dataclass(frozen=True)
class ContextEncoderConfig:
    """max_length: tokens per context, special tokens included (256, the longest input all-MiniLM-L6-v2 is
    configured for, holds the paper's 40 words a side; training configs set their own); pooling: [MASK]
    (the paper), [CLS] (BERT-Sim: `[CLS] left [SEP] right [SEP]`) or mean over `[CLS] left GAP right [SEP]`,
    where `gap` says what stands in the gap (with [MASK] pooling it is always the mask token)."""

    max_length: int = 256
    pooling: Pooling = PAPER_POOLING.context
    gap: GapMarker = PAPER_POOLING.gap

    def __post_init__(self) -> None:
        if self.max_length < SPECIAL_TOKENS_PER_CONTEXT + 1:
            raise QuoterError(f"a context needs max_length >= {SPECIAL_TOKENS_PER_CONTEXT + 1}, got {self.max_length}")

    def uses_mask_token(self) -> bool:
        """Whether contexts carry the tokenizer's mask token."""
        return self.pooling.mode is PoolingMode.MASK or (
            self.pooling.mode is PoolingMode.MEAN and self.gap is GapMarker.MASK
        )


@dataclass(frozen=True)
class QuoteEncoderConfig:
    """max_length: tokens per quote, special tokens included; alpha: weight of the sememe embeddings (Eq. 6;
    the paper tunes it in {0.1, 0.2, 0.5, 1.0, 2.0}; 0 turns sememes off); pooling: [CLS] (the paper) or
    mean; gloss: read a quote's gloss after it, behind the tokenizer's separator token."""

    max_length: int = 64
    alpha: float = 0.5
    pooling: Pooling = PAPER_POOLING.quote
    gloss: bool = False

    def __post_init__(self) -> None:
        if self.max_length < 3:
            raise QuoterError(f"a quote needs max_length >= 3, got {self.max_length}")
        if self.alpha < 0:
            raise QuoterError(f"alpha must not be negative, got {self.alpha}")
