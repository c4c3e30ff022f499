"""The context encoder through ONNX Runtime: the same vectors as torch (float32) or close ones (int8), for every
pooling; the graphs are cached under the encoder's content and their measured quality decides what `auto` runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from quoter.cli import app
from quoter.encoders.backend.context_runtime import (
    GRAPH_FILES,
    QUALITY_FILE,
    check_set,
    choose_runtime,
    content_key,
    exported_graphs,
)
from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder
from quoter.encoders.backend.onnx_export import export_onnx, quantize_onnx_int8
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.encoders.configs import ContextEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.fingerprint import saved_tokenizer
from quoter.encoders.pooling import GapMarker, Pooling, PoolingMode
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.recommender import Recommender
from quoter.serving.settings import RecommenderConfig
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.quantization_fixtures import loud_weights
from tests.serving_fixtures import tiny_bundle

QUERIES = [Query("the cat sat on", "mat ."), Query("a dog", ""), Query("", "ran home happy"), Query("我们喜欢", "学习")]
POOLINGS = {
    "mask": ContextEncoderConfig(max_length=32),
    "cls": ContextEncoderConfig(max_length=32, pooling=Pooling(PoolingMode.CLS)),
    "mean": ContextEncoderConfig(
        max_length=32, pooling=Pooling(PoolingMode.MEAN, "the", normalize=True, scale=20.0), gap=GapMarker.TEXT
    ),
}


@pytest.mark.parametrize("pooling", POOLINGS)
def test_onnx_vectors_are_the_torch_ones_and_int8_ones_close(tmp_path, pooling):
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer")
    # Loud weights: at BERT's initial scale every context's [CLS] or [MASK] vector is nearly the same one.
    encoder = ContextEncoder(loud_weights(tiny_model(tokenizer)), tokenizer, POOLINGS[pooling])
    modes = [module.training for module in encoder.modules()]
    export_onnx(encoder, tmp_path / "context.onnx")
    quantize_onnx_int8(tmp_path / "context.onnx", tmp_path / "int8.onnx")
    assert [module.training for module in encoder.modules()] == modes  # the export left them alone
    want = encoder.encode(QUERIES, batch_size=3)  # batches of mixed lengths: padding must not change a vector
    np.testing.assert_allclose(
        OnnxContextEncoder(encoder, tmp_path / "context.onnx").encode(QUERIES, 3), want, atol=1e-5
    )
    ints = OnnxContextEncoder(encoder, tmp_path / "int8.onnx").encode(QUERIES, 3)
    # int8 moves each vector by less than a quarter of the distance between any two contexts' float vectors.
    apart = np.linalg.norm(want[:, None] - want[None], axis=2)[np.triu_indices(len(QUERIES), 1)]
    assert ints.shape == want.shape and np.linalg.norm(ints - want, axis=1).max() < 0.25 * apart.min()


def test_auto_runs_the_fastest_runtime_whose_recorded_mrr_loss_is_small(tmp_path):
    bundle = tiny_bundle(tmp_path / "tiny")
    chosen = choose_runtime(bundle, ContextRuntime.AUTO, tmp_path)
    graphs = exported_graphs(bundle, tmp_path)
    assert graphs.parent == tmp_path / "onnx"  # beside the bundle, whose folder can be written
    recorded = json.loads((graphs / QUALITY_FILE).read_text(encoding="utf-8"))
    assert recorded["onnx"]["check_set"] == check_set(Language.EN).name and recorded["onnx"]["mean_cosine"] > 0.9999
    assert chosen.name == "onnx-int8" and chosen.quality.mrr == recorded["onnx-int8"]["mrr"]
    assert "onnx-int8 (MRR" in chosen.describe()

    recorded["onnx-int8"]["mrr"] = recorded["onnx-int8"]["float32_mrr"] - 0.006
    (graphs / QUALITY_FILE).write_text(json.dumps(recorded), encoding="utf-8")
    assert choose_runtime(bundle, ContextRuntime.AUTO, tmp_path).name == "onnx"
    assert choose_runtime(bundle, ContextRuntime.ONNX_INT8, tmp_path).name == "onnx-int8"  # asked for: as it is
    recorded["onnx"]["mrr"] = recorded["onnx"]["float32_mrr"] - 0.006
    (graphs / QUALITY_FILE).write_text(json.dumps(recorded), encoding="utf-8")
    assert choose_runtime(bundle, ContextRuntime.AUTO, tmp_path).name == "torch"


def test_the_cache_follows_the_encoders_content_and_a_bundle_without_a_folder_uses_quoter_cache(tmp_path, monkeypatch):
    bundle = tiny_bundle(tmp_path / "tiny")
    monkeypatch.setenv("QUOTER_CACHE", str(tmp_path / "cache"))
    graphs = exported_graphs(bundle, None)
    assert graphs.parent == tmp_path / "cache" / "onnx"
    assert exported_graphs(bundle, None) == graphs
    english = check_set(Language.EN).name
    key = content_key(bundle.context_encoder, english)
    assert graphs.name == key and content_key(bundle.context_encoder, "zh-bank-glosses") != key
    encoder = bundle.context_encoder
    assert content_key(ContextEncoder(encoder.model, encoder.tokenizer, ContextEncoderConfig(max_length=16)), "") != (
        content_key(encoder, "")
    )
    tokenizer = encoder.tokenizer.backend_tokenizer
    tokenizer.enable_truncation(8)
    tokenizer.enable_padding(length=12)
    assert content_key(encoder, english) == key  # state each call may change, not content
    tokenizer.no_truncation()
    tokenizer.no_padding()
    with torch.no_grad():
        encoder.model.embeddings.word_embeddings.weight[5] += 1.0
    assert content_key(encoder, english) != key
    assert sorted(path.name for path in graphs.iterdir()) == sorted([*GRAPH_FILES.values(), QUALITY_FILE])


def test_the_cache_key_reads_the_tokenizer_less_its_call_state(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer").backend_tokenizer
    tokenizer.enable_truncation(8)
    tokenizer.enable_padding(length=12)
    text = tokenizer.to_str()
    want = {key: value for key, value in json.loads(text).items() if key not in ("truncation", "padding")}
    assert json.loads(saved_tokenizer(text)) == want  # cut out of the text, the rest kept
    reordered = json.dumps(dict(reversed(json.loads(text).items())))  # not the usual order: parsed whole
    assert json.loads(saved_tokenizer(reordered)) == want


def test_a_recommender_on_onnx_ranks_as_on_torch(tmp_path):
    bundle = tiny_bundle(tmp_path / "tiny", Language.ZH)
    on_torch = Recommender(bundle).recommend(QUERIES, 2)
    on_onnx = Recommender(bundle, RecommenderConfig(runtime=ContextRuntime.ONNX)).recommend(QUERIES, 2)
    assert [[r.id for r in row] for row in on_onnx] == [[r.id for r in row] for row in on_torch]
    scores = [r.score for row in on_onnx for r in row]
    assert scores == pytest.approx([r.score for row in on_torch for r in row], rel=1e-4)


def test_quoter_batch_picks_a_runtime_by_default_and_says_which_first(tmp_path):
    tiny_bundle(tmp_path / "tiny").save(tmp_path / "bundle")
    contexts = tmp_path / "in.jsonl"
    contexts.write_text(json.dumps({"left": "the cat", "right": "home"}) + "\n", encoding="utf-8")
    args = ["batch", "--bundle", tmp_path / "bundle", "--input", contexts, "--output", tmp_path / "out.jsonl"]
    result = CliRunner().invoke(app, list(map(str, args)))
    assert result.exit_code == 0, result.output
    # Quoter's lines: transformers draws its loading bars first.
    ours = [line for line in result.output.splitlines() if line and "Loading weights" not in line]
    assert ours[0].startswith("context encoder runtime: onnx-int8 (MRR ")
    assert (tmp_path / "bundle" / "onnx").is_dir()  # cached beside the bundle


def test_quoter_evaluate_ranks_a_bundle_on_the_runtime_asked_for_and_says_which(tmp_path):
    from tests.conftest import write_quoter_file

    tiny_bundle(tmp_path / "tiny").save(tmp_path / "bundle")
    rows = [("the cat", "the cat sat on the mat", "home"), ("a dog", "the dog ran home", ""), ("un", "unhappiness", "")]
    data = write_quoter_file(tmp_path, rows * 3, {"train": [0, 3], "valid": [3, 6], "test": [6, 9]})
    metrics = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / f"{runtime}.json"
        args = ["evaluate", "--method", "bundle", "--bundle", tmp_path / "bundle", "--data", data, "--out", out]
        result = CliRunner().invoke(app, [*map(str, args), "--runtime", runtime])
        assert result.exit_code == 0, result.output
        assert f"context encoder runtime: {runtime}" in result.output
        metrics[runtime] = json.loads(out.read_text())
    assert metrics["onnx"]["mrr"] == pytest.approx(metrics["torch"]["mrr"], abs=1e-6)
    assert (tmp_path / "bundle" / "onnx").is_dir()


def test_the_english_check_set_is_the_example_set_and_every_bank_quote_found_from_its_gloss():
    from quoter.quote_bank import load_quote_bank

    check, bank = check_set(Language.EN), load_quote_bank(Language.EN)
    assert len(check.queries) == 126 + len(bank) and len(check.gold) == len(check.queries)
    assert len(set(check.quotes)) == len(check.quotes)
    for query, gold, record in zip(check.queries[126:], check.gold[126:], bank):
        assert query == Query(record.gloss, "") and check.quotes[gold] == record.text


def test_contexts_are_encoded_in_calls_that_pad_as_little_as_they_cost():
    from quoter.encoders.batching import least_padding_calls

    # One call of 8 pads to 27 tokens (216); three calls cost 3 x 10 but pad to 28 + 88 + 54 tokens.
    assert least_padding_calls([13, 14, 17, 21, 21, 22, 26, 27], 64, 10) == [2, 6, 8]
    assert least_padding_calls([20] * 10, 64, 10) == [10]  # equal lengths: one call
    assert least_padding_calls([20] * 10, 4, 10) == [2, 6, 10]  # never more than `most` rows a call
    assert least_padding_calls([5, 100], 64, 0) == [1, 2] and least_padding_calls([5, 100], 64, 1000) == [2]
    assert least_padding_calls([], 64, 10) == [] and least_padding_calls([7], 64, 10) == [1]
