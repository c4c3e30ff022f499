"""A BERT-style model cut in two at a layer: the frozen bottom (embeddings and the lowest layers, which training
never changes) and the trainable top. Running them apart is what lets training compute the bottom once per
context and keep its output (quoter/training/layer_cache.py); run one after the other they give the model's own
output."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from quoter.encoders.limits import segment_inputs
from quoter.errors import QuoterError

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def _parts(model: PreTrainedModel) -> tuple[nn.Module, nn.ModuleList]:
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    embeddings = getattr(model, "embeddings", None)
    if layers is None or embeddings is None:
        raise QuoterError(f"model.freeze_layers: {type(model).__name__} has no embeddings and encoder.layer to freeze")
    return embeddings, layers


def freeze_lower_layers(model: PreTrainedModel, count: int) -> None:
    """Keep a BERT-style model's embeddings and its lowest `count` transformer layers fixed."""
    embeddings, layers = _parts(model)
    if count > len(layers):
        raise QuoterError(f"model.freeze_layers: the model has {len(layers)} layers, got {count}")
    for module in (embeddings, *layers[:count]):
        module.requires_grad_(False)


def frozen_modules(model: PreTrainedModel, count: int) -> list[nn.Module]:
    """The embeddings and the lowest `count` layers (none when `count` is 0)."""
    if count == 0:
        return []
    embeddings, layers = _parts(model)
    return [embeddings, *layers[:count]]


class FrozenBottom(nn.Module):
    """What both encoders share about a frozen bottom: which layers it holds, and that it runs as in inference
    (no dropout) even while the rest trains, so its output for an input never changes and can be kept."""

    model: PreTrainedModel
    frozen_layers = 0

    def freeze_bottom(self, count: int) -> None:
        """Freeze the embeddings and the lowest `count` layers of the encoder's model."""
        freeze_lower_layers(self.model, count)
        self.frozen_layers = count
        self.train(self.training)

    def train(self, mode: bool = True) -> FrozenBottom:
        super().train(mode)
        for module in frozen_modules(self.model, self.frozen_layers):
            module.eval()
        return self


def set_dropout(model: nn.Module, probability: float) -> None:
    """Every dropout of the model (hidden states and attention weights alike) at `probability`."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = probability


def _attention_mask(model: PreTrainedModel, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None:
    """The mask in the form the model's layers take, made the way the model itself makes it."""
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # transformers 4: an additive mask
        return model.get_extended_attention_mask(attention_mask, attention_mask.shape)
    return create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=attention_mask)


def _run_layers(
    model: PreTrainedModel, hidden: torch.Tensor, attention_mask: torch.Tensor, start: int, stop: int | None
) -> torch.Tensor:
    mask = _attention_mask(model, hidden, attention_mask)
    for layer in _parts(model)[1][start:stop]:
        hidden = layer(hidden, mask)
        if isinstance(hidden, tuple):  # transformers 4 layers return (states, ...)
            hidden = hidden[0]
    return hidden


def bottom_states(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor,
    count: int,
) -> torch.Tensor:
    """The hidden states after the embeddings and the lowest `count` layers, (batch, tokens, hidden)."""
    hidden = _parts(model)[0](input_ids=input_ids, **segment_inputs(model, token_type_ids))
    return _run_layers(model, hidden, attention_mask, 0, count)


def top_states(model: PreTrainedModel, states: torch.Tensor, attention_mask: torch.Tensor, start: int) -> torch.Tensor:
    """The final hidden states from the states after layer `start` (what bottom_states gave)."""
    return _run_layers(model, states, attention_mask, start, None)
