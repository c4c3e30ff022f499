"""A context gets the same vector alone and beside any other contexts, padding included, on every context
runtime; `auto` runs an ONNX runtime only if its export measured so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quoter.encoders.backend.context_runtime import (
    QUALITY_FILE,
    batch_deviation,
    check_set,
    choose_runtime,
    exported_graphs,
    mixed_calls,
)
from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder
from quoter.encoders.backend.onnx_export import export_onnx, quantize_onnx_int8
from quoter.encoders.backend.runtime_config import MAX_BATCH_DEVIATION, ContextRuntime
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.recommender import context_runtime
from quoter.serving.settings import RecommenderConfig
from tests.quantization_fixtures import loud_weights
from tests.serving_fixtures import tiny_bundle

# From 3 to 24 tokens: every call of more than one of them pads some.
CONTEXTS = [
    Query("a", ""),
    Query("the cat sat on the mat and the dog ran home happy , the cat", "sat on the mat . the dog ran home"),
    Query("the dog", "ran"),
    Query("我们喜欢", "学习"),
    Query("the cat sat on", "the mat ."),
    Query("", "the dog ran home happy"),
    Query("a cat , a dog , a cat", "ran home"),
]
RUNTIMES = {
    "torch": RecommenderConfig(runtime=ContextRuntime.TORCH),
    "onnx": RecommenderConfig(runtime=ContextRuntime.ONNX),
    "onnx-int8": RecommenderConfig(runtime=ContextRuntime.ONNX_INT8),
    "torch-int8": RecommenderConfig(int8=True),
}


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    """A tiny bundle whose context encoder's linear layers shape its vectors, and a folder for its graphs."""
    folder = tmp_path_factory.mktemp("loud")
    bundle = tiny_bundle(folder / "tiny")
    loud_weights(bundle.context_encoder.model)
    return bundle, folder


def assert_same_vectors(batched: np.ndarray, alone: np.ndarray) -> None:
    """Equal up to float32 rounding: 1e-5 of each vector's largest component."""
    moved = (np.abs(batched - alone) / np.abs(alone).max(axis=1, keepdims=True)).max()
    assert moved <= 1e-5, f"a vector moved by {moved:.1e} of its largest component"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_context_gets_the_same_vector_alone_and_in_any_batch(loud, runtime):
    bundle, folder = loud
    chosen = context_runtime(bundle, RUNTIMES[runtime], folder)
    assert chosen.name == runtime
    alone = np.concatenate([chosen.encoder.encode([query]) for query in CONTEXTS])
    rng = np.random.default_rng(0)
    for batch_size in (2, 3, len(CONTEXTS)):
        order = rng.permutation(len(CONTEXTS))
        batched = chosen.encoder.encode([CONTEXTS[index] for index in order], batch_size)
        assert_same_vectors(batched, alone[order])
    if isinstance(chosen.encoder, OnnxContextEncoder):  # one call for all, each padded to the longest
        assert_same_vectors(chosen.encoder.encode_together(CONTEXTS), alone)


def test_the_export_check_tells_a_graph_whose_vectors_follow_their_neighbours(loud, tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    bundle, _ = loud
    encoder = bundle.context_encoder
    export_onnx(encoder, tmp_path / "context.onnx")
    quantize_onnx_int8(tmp_path / "context.onnx", tmp_path / "per-token.onnx")
    # ONNX Runtime's dynamic quantization: one activation scale over each call, the former onnx-int8.
    quantize_dynamic(tmp_path / "context.onnx", tmp_path / "per-call.onnx", weight_type=QuantType.QInt8)
    queries = check_set(Language.EN).queries[:40]
    deviations = {}
    for name in ("context", "per-token", "per-call"):
        onnx = OnnxContextEncoder(encoder, tmp_path / f"{name}.onnx")
        deviations[name] = batch_deviation(onnx.encode(queries, batch_size=1), mixed_calls(onnx, queries))
    assert deviations["context"] <= MAX_BATCH_DEVIATION and deviations["per-token"] <= MAX_BATCH_DEVIATION
    assert deviations["per-call"] > 100 * MAX_BATCH_DEVIATION, deviations


def test_auto_runs_no_runtime_whose_vectors_moved_with_their_neighbours_at_export(loud, tmp_path):
    bundle, folder = loud[0], tmp_path
    graphs = exported_graphs(bundle, folder)
    recorded = json.loads((graphs / QUALITY_FILE).read_text(encoding="utf-8"))
    assert all(recorded[name]["batch_deviation"] <= MAX_BATCH_DEVIATION for name in ("onnx", "onnx-int8"))
    assert choose_runtime(bundle, ContextRuntime.AUTO, folder).name == "onnx-int8"

    recorded["onnx-int8"]["batch_deviation"] = 10 * MAX_BATCH_DEVIATION
    (graphs / QUALITY_FILE).write_text(json.dumps(recorded), encoding="utf-8")
    assert choose_runtime(bundle, ContextRuntime.AUTO, folder).name == "onnx"
    assert choose_runtime(bundle, ContextRuntime.ONNX_INT8, folder).name == "onnx-int8"  # asked for: as it is
    recorded["onnx"]["batch_deviation"] = 10 * MAX_BATCH_DEVIATION
    (graphs / QUALITY_FILE).write_text(json.dumps(recorded), encoding="utf-8")
    assert choose_runtime(bundle, ContextRuntime.AUTO, folder).name == "torch"
