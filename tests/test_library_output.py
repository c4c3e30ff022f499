"""What the libraries print under the command line: into a pipe or a file, none of their progress bars, debug
lines or advertisements, only Quoter's own lines (and their warnings and errors)."""

import os
import re
import subprocess
import sys

import pytest

from quoter.training.precision import auto_precision
from tests.serving_fixtures import tiny_bundle
from tests.training_fixtures import write_dataset, write_model

# Lines that are not ours: transformers' and Lightning's progress bars, bm25s's debug lines (shown once
# onnxruntime's quantization had set up logging), Lightning's hardware report, advertisement, stop line and
# a deprecation warning torch gives its code.
NOISE = re.compile(r"it/s|Loading weights|DEBUG|Tip:|litlogger|GPU available|Trainer.fit|Epoch \d|LeafSpec")


def quoter(tmp_path, *args):
    """Run `python -m quoter ARGS` with stderr a pipe, as in a script or a log; return its stderr lines."""
    env = {key: value for key, value in os.environ.items() if key != "HF_HUB_DISABLE_PROGRESS_BARS"}
    env["QUOTER_CACHE"] = str(tmp_path / "cache")  # a fresh one: exports happen in this run
    done = subprocess.run(
        [sys.executable, "-m", "quoter", *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("model"))


def test_a_batch_prints_only_its_own_lines(tmp_path):
    tiny_bundle(tmp_path / "parts").save(tmp_path / "bundle")
    (tmp_path / "in.tsv").write_text("the cat\ton the mat\nthe dog\thome\n", encoding="utf-8")
    lines = quoter(tmp_path, "batch", "--bundle", "bundle", "--input", "in.tsv", "--output", "out.jsonl")
    assert lines == [lines[0], "out.jsonl: 2 contexts (2 ranked now)"]
    assert lines[0].startswith("context encoder runtime: onnx-int8")


def test_a_hybrid_evaluation_whose_encoder_is_exported_prints_only_its_own_lines(tmp_path, data, model):
    lines = quoter(
        tmp_path, "evaluate", "--method", "hybrid", "--model", model, "--data", data, "--runtime", "onnx-int8"
    )
    assert not [line for line in lines if NOISE.search(line)]
    assert any(line.startswith("context encoder runtime: onnx-int8") for line in lines)


def test_training_prints_only_its_own_lines(tmp_path, data, model):
    settings = ["model.context_max_length=32", "model.quote_max_length=16", "negatives.count=3", "fusion.enabled=false"]
    settings += ["joint.batch_size=4", "joint.epochs=2", "retrain.enabled=false", "run.logger=csv"]
    sets = [arg for setting in settings for arg in ("--set", setting)]
    lines = quoter(tmp_path, "train", "--data", data, "--output", "bundle", "--set", f"model.name={model}", *sets)
    assert not [line for line in lines if NOISE.search(line)]
    assert f"training on cpu, devices auto, precision {auto_precision()}" in lines
    assert any(
        re.fullmatch(r"stage 1: stopped after 48 steps and 2 full epochs; best validation MRR .*", line)
        for line in lines
    )
