"""What a model can take: how many tokens (a setting may ask for more than its position embeddings allow),
and whether it has segment (token type) embeddings at all (DistilBERT, for one, has none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast


def usable_length(wanted: int, model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast) -> int:
    """`wanted`, capped by the model's position embeddings and the tokenizer's declared maximum (which is
    the tighter one for RoBERTa-style models, whose first positions are reserved)."""
    limits = [wanted, getattr(model.config, "max_position_embeddings", wanted)]
    declared = getattr(tokenizer, "model_max_length", None)
    if isinstance(declared, int) and declared > 0:
        limits.append(declared)
    return min(limits)


def segment_inputs(model: PreTrainedModel, token_type_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """`token_type_ids` as a keyword argument for models with segment embeddings, nothing for the others."""
    return {"token_type_ids": token_type_ids} if getattr(model.config, "type_vocab_size", 0) > 0 else {}
