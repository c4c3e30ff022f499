"""Training's precision: bf16 mixed on GPUs, float32 on a CPU by default; in bf16 on a CPU the models attend
by plain matrix products while a stage trains, and get their own attention back after it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from quoter.languages import Language
from quoter.ranking import Query
from quoter.training.data import QuoteDataModule
from quoter.training.pipeline import build_encoders
from quoter.training.precision import auto_precision, training_attention
from quoter.training.retrain_module import RetrainModule
from quoter.training.trainer import run_stage
from tests.training_fixtures import tiny_config, training_data

QUERIES = [Query("the cat", "sat on the mat ."), Query("a dog", "")]


def test_auto_precision_follows_the_hardware(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert auto_precision() == "32-true"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert auto_precision() == "bf16-mixed"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert auto_precision() == "16-mixed"


def _models(tmp_path) -> tuple[nn.ModuleDict, list]:
    encoders = build_encoders(tiny_config(tmp_path), Language.EN)
    module = nn.ModuleDict({"context": encoders.context, "quote": encoders.quote})
    return module, [encoders.context.model, encoders.quote.model]


def _attention(models: list) -> set[str]:
    return {model.config._attn_implementation for model in models}


def test_bf16_on_a_cpu_attends_eagerly_within_the_block_only(tmp_path):
    module, models = _models(tmp_path)
    own = _attention(models)
    assert own != {"eager"}
    context = module["context"]
    batch = context.prepare(QUERIES)
    with torch.no_grad():
        fused = context(batch)
        with training_attention(module, on_cpu=True, precision="bf16-mixed"):
            assert _attention(models) == {"eager"}
            eager = context(batch)
    assert _attention(models) == own
    torch.testing.assert_close(eager, fused, rtol=0, atol=1e-5)
    with pytest.raises(RuntimeError), training_attention(module, on_cpu=True, precision="bf16-mixed"):
        raise RuntimeError("a failed stage")
    assert _attention(models) == own


@pytest.mark.parametrize(("on_cpu", "precision"), [(True, "32-true"), (False, "bf16-mixed")])
def test_other_precisions_and_devices_keep_the_models_attention(tmp_path, on_cpu, precision):
    module, models = _models(tmp_path)
    own = _attention(models)
    with training_attention(module, on_cpu=on_cpu, precision=precision):
        assert _attention(models) == own


def test_a_stage_trains_in_bf16_on_a_cpu(tmp_path):
    # Works on any CPU (without AMX bf16 is emulated, only slower).
    config = tiny_config(tmp_path, **{"run.precision": "bf16-mixed", "retrain.epochs": "2"})
    data = training_data(tmp_path / "d")
    encoders = build_encoders(config, Language.EN)
    own = encoders.context.model.config._attn_implementation
    vectors = encoders.quote.encode_records(data.records)
    module = RetrainModule(encoders.context, vectors, data.train_quote_ids, config.retrain)
    start = {key: value.clone() for key, value in module.state_dict().items()}
    datamodule = QuoteDataModule(data, encoders.context, 8, 16, 1, False, None)
    metrics = run_stage(module, datamodule, config.retrain, config.run, tmp_path / "run", "retrain")
    assert 0 < metrics["val_mrr"] <= 1 and metrics["epochs"] == 2
    changed = [key for key, value in module.state_dict().items() if not torch.equal(value, start[key])]
    assert changed and all(module.state_dict()[key].dtype == torch.float32 for key in changed)
    assert encoders.context.model.config._attn_implementation == own
