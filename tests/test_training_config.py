"""Training settings: YAML plus dotted overrides, one-line errors that name the key, and the two command
lines (`quoter train --set k=v`, `python train.py --set k=v`, the same command) that train a bundle `quoter
evaluate` can rank with."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from quoter.encoders.pooling import PoolingChoice
from quoter.errors import QuoterError
from quoter.settings import parse_assignments
from quoter.training.config import StageConfig, load_config
from tests.training_fixtures import write_dataset, write_model

REPO = Path(__file__).resolve().parent.parent


def test_yaml_and_overrides_set_typed_values(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("joint:\n  epochs: 4\n  lr: 5e-5\nmodel:\n  pooling: cls\n", encoding="utf-8")
    config = load_config(path, {"joint.epochs": "2", "negatives.in_batch": "true"}, {"data.path": "no"})
    assert config.joint.epochs == 2 and config.joint.lr == 5e-5 and config.negatives.in_batch is True
    assert config.model.pooling is PoolingChoice.CLS and config.data.path == "no"
    assert config.retrain.epochs == 3  # untouched settings keep their one default


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"joint.epoch": "2"}, "joint.epoch: unknown setting; known in this section: enabled, epochs"),
        ({"joint.epochs": "two"}, "joint.epochs: expected an integer, got 'two'"),
        ({"negatives.count": "0"}, "negatives.count: must be at least 1, got 0"),
        ({"model.pooling": "max"}, "model.pooling: expected one of native, mask, cls, mean, got 'max'"),
        ({"joint.enabled": "false", "retrain.enabled": "false"}, "at least one training stage must be enabled"),
        ({"joint.epochs.x": "1"}, "joint.epochs: expected an integer, got {'x': 1}"),
        # Both were taken in, and failed in Lightning once the data and the model were loaded.
        ({"run.precision": "fp7"}, "run.precision: expected one of auto, 64, 32, 16, transformer-engine, "),
        ({"run.devices": "two"}, "run.devices: expected 'auto' or a number of at least 1, got 'two'"),
        ({"run.devices": "0"}, "run.devices: expected 'auto' or a number of at least 1, got '0'"),
    ],
)
def test_a_bad_setting_is_a_one_line_error_naming_the_key(overrides, message):
    with pytest.raises(QuoterError) as error:
        load_config(None, overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("precision", ["auto", "32-true", "bf16-mixed", "16-mixed", "32", "bf16"])
def test_every_precision_lightning_takes_is_taken(precision):
    assert load_config(None, {"run.precision": precision, "run.devices": "2"}).run.precision == precision


def test_a_config_builds_on_its_base_which_it_names_relative_to_itself(tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "base.yaml").write_text("joint:\n  epochs: 4\n  lr: 0.1\nrun:\n  seed: 7\n", "utf-8")
    (tmp_path / "small.yaml").write_text("base: shared/base.yaml\njoint:\n  lr: 0.2\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "shared")
    config = load_config(tmp_path / "small.yaml", {"run.seed": "8"})
    assert (config.joint.epochs, config.joint.lr, config.run.seed) == (4, 0.2, 8)
    (tmp_path / "shared" / "base.yaml").write_text("base: ../small.yaml\n", encoding="utf-8")
    with pytest.raises(QuoterError, match="base: the config files name each other as their base"):
        load_config(tmp_path / "small.yaml")
    (tmp_path / "shared" / "base.yaml").unlink()
    with pytest.raises(QuoterError, match="base.yaml: config file not found"):
        load_config(tmp_path / "small.yaml")


def test_an_override_without_a_value_is_an_error():
    with pytest.raises(QuoterError, match="expected key=value"):
        parse_assignments(["joint.epochs"])


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO)


def test_the_command_line_reports_a_bad_key_in_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("joint:\n  epoch: 2\n", encoding="utf-8")
    from_set = run("-m", "quoter", "train", "--set", "joint.epoch=2")
    for result in (
        from_set,
        run("-m", "quoter", "train", "--config", str(path)),
        run("train.py", "--config", str(path)),
    ):
        assert result.returncode == 2
        known = ", ".join(field.name for field in dataclasses.fields(StageConfig))
        assert known.startswith("enabled, epochs, batch_size, lr, weight_decay, warmup_fraction, patience")
        assert result.stderr.strip().splitlines() == [
            f"error: joint.epoch: unknown setting; known in this section: {known}"
        ]


def test_train_py_writes_a_bundle_that_quoter_evaluate_ranks_with(tmp_path):
    data = write_dataset(tmp_path / "data")
    model = write_model(tmp_path / "model")
    config = tmp_path / "tiny.yaml"
    config.write_text(
        f"model:\n  name: {model}\n  context_max_length: 32\n  quote_max_length: 16\n"
        "negatives:\n  count: 3\njoint:\n  batch_size: 8\n  lr: 0.003\nretrain:\n  batch_size: 8\n  lr: 0.003\n"
        "run:\n  logger: csv\n  progress_bar: false\n",
        encoding="utf-8",
    )
    bundle = tmp_path / "bundle"
    trained = run(
        "train.py", "--config", str(config), "--data", str(data), "--output", str(bundle), "--set", "joint.epochs=1"
    )
    assert trained.returncode == 0, trained.stderr
    assert (bundle / "bundle.json").is_file() and (tmp_path / "bundle.checkpoints" / "joint" / "logs").is_dir()
    evaluated = run("-m", "quoter", "evaluate", "--method", "bundle", "--bundle", str(bundle), "--data", str(data))
    assert evaluated.returncode == 0, evaluated.stderr
    assert "ranking all 10 quotes" in evaluated.stdout
    wrong = run("-m", "quoter", "evaluate", "--method", "bundle", "--data", str(data))
    assert wrong.returncode == 2 and "--bundle DIR" in wrong.stderr


def test_every_shipped_config_loads_and_the_gpu_ones_train_until_validation_stops_improving():
    configs = {path.stem: load_config(path) for path in sorted((REPO / "configs").glob("*.yaml"))}
    assert {"zh-offline", "en-gpu", "zh-gpu", "zh-classical-gpu"} <= configs.keys()
    for name in ("en-gpu", "zh-gpu", "zh-classical-gpu"):
        config = configs[name]
        for stage in (config.joint, config.retrain):
            assert stage.max_steps == -1 and stage.epochs >= 10 and stage.validate_every is None, name
        assert config.model.freeze_layers == 0 and config.model.dropout is None, name
        assert config.negatives.in_batch and config.negatives.cache, name
    assert configs["zh-classical-gpu"].data.language.value == "zh-classical"
