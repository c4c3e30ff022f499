"""How an encoder turns its hidden states into one vector, and the text it puts before its input.

Pooling is a saved part of each encoder (the idea of sentence-transformers' Pooling module): the paper's
BERT reads a context at the [MASK] in the gap and a quote at [CLS], while sentence embedders such as
all-MiniLM-L6-v2 and multilingual-e5 were trained to average all tokens (e5 also after the prompts
`query: ` and `passage: `) and to compare by cosine. Read at the wrong position, an untrained sentence
embedder gives nearly the same vector for any input, so pooling must follow the model."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from quoter.errors import QuoterError
from quoter.saved_config import to_json

if TYPE_CHECKING:
    import torch


class PoolingMode(str, Enum):
    """Which hidden states make the vector."""

    MASK = "mask"  # the state at the [MASK] standing in the gap (the paper's context encoder)
    CLS = "cls"  # the state of the first token
    MEAN = "mean"  # the average of every token's state, padding excluded


class GapMarker(str, Enum):
    """What stands in the gap of a context pooled over all tokens: the tokenizer's mask token, a written
    placeholder (GAP_TEXT), or nothing (left and right simply meet)."""

    MASK = "mask"
    TEXT = "text"
    NONE = "none"


GAP_TEXT = "___"


@dataclass(frozen=True)
class Pooling:
    """mode: see PoolingMode; prompt: text put before every input (e5: 'query: ', 'passage: ');
    normalize: scale every vector to length `scale`, so that inner products are `scale` times the cosine
    (sentence embedders compare by cosine; a scale above 1 keeps the softmax over quotes, and training's
    cross-entropy, from being nearly flat)."""

    mode: PoolingMode = PoolingMode.CLS
    prompt: str = ""
    normalize: bool = False
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise QuoterError(f"pooling scale: must be positive, got {self.scale}")

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """One vector per row of `hidden` (batch, tokens, dim): the state at `positions` (MASK, CLS) or the
        mean over the tokens the attention mask keeps (MEAN); then normalised if asked."""
        import torch  # here, so that reading settings (the command line's defaults) never imports torch

        if self.mode is PoolingMode.MEAN:
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        else:
            vectors = hidden[torch.arange(hidden.shape[0], device=hidden.device), positions]
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1) * self.scale
        return vectors

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON values, derived from the fields as saved encoders hold them."""
        return to_json(self)


@dataclass(frozen=True)
class EncoderPooling:
    """The pooling of both encoders and the gap marker of contexts: what a model source declares as its
    native setting, or one of the named choices (PoolingChoice)."""

    context: Pooling
    quote: Pooling
    gap: GapMarker = GapMarker.MASK


class PoolingChoice(str, Enum):
    """What a user selects: the model's native pooling, the paper's [MASK] setting, BERT-Sim's [CLS], or mean
    pooling (with the model's prompts and normalisation)."""

    NATIVE = "native"
    MASK = "mask"
    CLS = "cls"
    MEAN = "mean"


# The paper's setting: the context at its [MASK], the quote at [CLS], plain inner products.
PAPER_POOLING = EncoderPooling(Pooling(PoolingMode.MASK), Pooling(PoolingMode.CLS), GapMarker.MASK)


def choose_pooling(choice: PoolingChoice, native: EncoderPooling) -> EncoderPooling:
    """The pooling of both encoders for a user's choice, given the model's native pooling."""
    if choice is PoolingChoice.NATIVE:
        return native
    if choice is PoolingChoice.MASK:
        return PAPER_POOLING
    if choice is PoolingChoice.CLS:
        return EncoderPooling(Pooling(PoolingMode.CLS), Pooling(PoolingMode.CLS), GapMarker.MASK)
    mean = PoolingMode.MEAN
    return replace(native, context=replace(native.context, mode=mean), quote=replace(native.quote, mode=mean))
