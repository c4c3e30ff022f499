"""Dynamic int8 quantization of the context encoder: close vectors, same ranking, original untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from quoter.encoders.backend.quantization import quantize_dynamic_int8
from quoter.encoders.configs import ContextEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.errors import QuoterError
from quoter.metrics import rank_metrics, ranks_from_scores
from quoter.ranking import Query
from tests.encoder_fixtures import WORDS, tiny_model, tiny_tokenizer
from tests.quantization_fixtures import loud_weights

ENGLISH = [word for word in WORDS if word.isascii() and word.isalpha()]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> ContextEncoder:
    """The tiny BERT with weights large enough that its linear layers shape the output (loud_weights)."""
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tiny"))
    return ContextEncoder(loud_weights(tiny_model(tokenizer)), tokenizer, ContextEncoderConfig())


def random_queries(count: int, seed: int = 0) -> list[Query]:
    """Contexts of 1-7 words before the gap and 0-5 after it, drawn from the tiny vocabulary."""
    rng = np.random.default_rng(seed)
    return [
        Query(" ".join(rng.choice(ENGLISH, rng.integers(1, 8))), " ".join(rng.choice(ENGLISH, rng.integers(0, 6))))
        for _ in range(count)
    ]


def test_every_linear_layer_is_quantized_and_the_rest_is_shared(encoder):
    quantized = quantize_dynamic_int8(encoder)
    linears = [name for name, module in encoder.model.named_modules() if isinstance(module, nn.Linear)]
    assert linears
    for name in linears:
        assert isinstance(quantized.model.get_submodule(name), torch.ao.nn.quantized.dynamic.Linear), name
    assert quantized.tokenizer is encoder.tokenizer
    assert quantized.config == encoder.config
    assert quantized.max_length == encoder.max_length


def test_the_original_encoder_is_left_untouched(encoder):
    queries = random_queries(8)
    before_state = {key: value.clone() for key, value in encoder.model.state_dict().items()}
    before_vectors = encoder.encode(queries)
    quantize_dynamic_int8(encoder)
    assert all(type(module) is not torch.ao.nn.quantized.dynamic.Linear for module in encoder.model.modules())
    after_state = encoder.model.state_dict()
    assert after_state.keys() == before_state.keys()
    assert all(torch.equal(after_state[key], value) for key, value in before_state.items())
    np.testing.assert_array_equal(encoder.encode(queries), before_vectors)


def test_int8_vectors_are_close_to_the_float_ones(encoder):
    queries = random_queries(40)
    floats = encoder.encode(queries)
    ints = quantize_dynamic_int8(encoder).encode(queries)
    assert ints.shape == floats.shape and ints.dtype == np.float32
    cosine = (floats * ints).sum(axis=1) / np.linalg.norm(floats, axis=1) / np.linalg.norm(ints, axis=1)
    assert cosine.min() > 0.99
    # Not trivially equal: the quantized layers really compute something different.
    assert not np.allclose(floats, ints, atol=1e-6)


def test_ranks_on_a_planted_quote_set_stay_nearly_the_same(encoder):
    # Each context's gold quote is its own float vector plus noise, loud enough that the gold quote is not
    # always first, so the ranks have room to move under quantization. The tiny model's context vectors lie
    # close together, so near-ties make a rank move by a place or two now and then: equal-ish, not equal.
    queries = random_queries(60, seed=1)
    floats = encoder.encode(queries)
    units = floats / np.linalg.norm(floats, axis=1, keepdims=True)
    noise = np.random.default_rng(2).normal(scale=0.1, size=units.shape).astype(np.float32)
    quotes = units + noise
    gold = np.arange(len(queries))
    float_ranks = ranks_from_scores(floats @ quotes.T, gold)
    int8_ranks = ranks_from_scores(quantize_dynamic_int8(encoder).encode(queries) @ quotes.T, gold)
    assert float_ranks.max() > 1
    assert np.mean(float_ranks == int8_ranks) >= 0.8
    assert np.abs(float_ranks - int8_ranks).max() <= 3
    assert abs(rank_metrics(float_ranks)["mrr"] - rank_metrics(int8_ranks)["mrr"]) < 0.02


def test_a_model_off_the_cpu_is_refused(encoder, monkeypatch):
    monkeypatch.setattr(type(encoder.model), "device", property(lambda self: torch.device("meta")))
    with pytest.raises(QuoterError, match="CPU"):
        quantize_dynamic_int8(encoder)
