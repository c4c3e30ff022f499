"""Both encoders made from a pretrained model, the one way training and zero-shot bundles make them: the model's
native pooling unless another is chosen, and the settings of each encoder."""

from __future__ import annotations

from dataclasses import dataclass, replace

from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.model_sources import load_pretrained, native_pooling
from quoter.encoders.pooling import GapMarker, PoolingChoice, choose_pooling
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.sememes.alignment import SememeAnnotator


@dataclass(frozen=True)
class EncoderRecipe:
    """How both encoders read a pretrained model. pooling: the model's native pooling or a named one (see
    PoolingChoice); gap: what stands in the gap of a mean-pooled context (None: the pooling's choice); scale:
    the factor on cosine scores of normalised context pooling (None: the pooling's); the lengths count special
    tokens; gloss: quotes are read with their glosses; alpha: the weight of the sememe embeddings."""

    pooling: PoolingChoice = PoolingChoice.NATIVE
    gap: GapMarker | None = None
    scale: float | None = None
    context_max_length: int = ContextEncoderConfig.max_length
    quote_max_length: int = QuoteEncoderConfig.max_length
    gloss: bool = False
    alpha: float = QuoteEncoderConfig.alpha


def _encoder_configs(name: str, recipe: EncoderRecipe) -> tuple[ContextEncoderConfig, QuoteEncoderConfig]:
    """The settings of the context and quote encoders of model `name` read as `recipe` says."""
    chosen = choose_pooling(recipe.pooling, native_pooling(name))
    context_pooling = chosen.context if recipe.scale is None else replace(chosen.context, scale=recipe.scale)
    context = ContextEncoderConfig(recipe.context_max_length, context_pooling, recipe.gap or chosen.gap)
    return context, QuoteEncoderConfig(recipe.quote_max_length, recipe.alpha, chosen.quote, recipe.gloss)


def pretrained_encoders(
    name: str, recipe: EncoderRecipe, annotator: SememeAnnotator | None = None, shared: bool = False
) -> tuple[ContextEncoder, QuoteEncoder]:
    """The context and quote encoders of pretrained model `name` (Hugging Face name, folder or offline:*), read
    as `recipe` says, the quote encoder with the sememes of `annotator`. `shared`: one copy of the model for
    both (a zero-shot bundle trains nothing); else a copy each, since training trains them apart."""
    context_config, quote_config = _encoder_configs(name, recipe)
    context_model, context_tokenizer = load_pretrained(name)
    quote_model, quote_tokenizer = (context_model, context_tokenizer) if shared else load_pretrained(name)
    context = ContextEncoder(context_model, context_tokenizer, context_config)
    return context, QuoteEncoder(quote_model, quote_tokenizer, quote_config, annotator)
