"""An untrained bundle: one pretrained model read by both encoders, its quote vectors encoded now."""

from __future__ import annotations

import json
from collections.abc import Sequence

from quoter.bundle import Bundle
from quoter.encoders.configs import ENCODE_BATCH
from quoter.encoders.factory import EncoderRecipe, pretrained_encoders
from quoter.encoders.model_sources import default_model
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.quote_set import encode_quote_set
from quoter.saved_config import to_json


def zero_shot_bundle(
    language: Language,
    quotes: Sequence[QuoteRecord],
    model: str | None = None,
    pooling: PoolingChoice = PoolingChoice.NATIVE,
    gloss: bool = False,
    gap: GapMarker | None = None,
    batch_size: int = ENCODE_BATCH,
) -> Bundle:
    """An untrained bundle: one pretrained model (the language's default unless named) for both encoders,
    read with its native pooling unless another is chosen (`gap` overrides its gap marker), without
    sememes; quote vectors encoded now (with the quotes' glosses when `gloss`)."""
    name = model or default_model(language)
    context, quote_encoder = pretrained_encoders(name, EncoderRecipe(pooling, gap, gloss=gloss), shared=True)
    # Its vectors are the pretrained model's: the name and the settings identify them.
    quote_encoder.identity = f"pretrained {name} read with {json.dumps(to_json(quote_encoder.config))}"
    encoded = encode_quote_set(quote_encoder, quotes, batch_size=batch_size)
    info = {"model": name, "trained": False}
    return Bundle(language, context, quote_encoder, encoded.records, encoded.vectors, info=info)
