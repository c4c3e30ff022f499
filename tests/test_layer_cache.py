"""The frozen bottom kept once (model.freeze_layers with model.cache_frozen_layers): the top run over the kept
states gives the model's own output, training from them gives the weights of training without them, and a
kept file is reused only by what it was made for."""

from __future__ import annotations

import numpy as np
import torch

from quoter.languages import Language
from quoter.ranking import Query
from quoter.training.data import QuoteDataModule, SampleCollator
from quoter.training.joint_module import JointModule
from quoter.training.layer_cache import LayerCache
from quoter.training.negatives import NegativeSampler
from quoter.training.pipeline import build_encoders
from quoter.training.retrain_module import RetrainModule
from quoter.training.trainer import run_stage
from tests.training_fixtures import tiny_config, training_data

QUERIES = [Query("the cat", "sat on the mat ."), Query("a dog", ""), Query("", "ran home happy")]


def test_the_top_over_the_bottom_states_is_the_whole_model(tmp_path):
    config = tiny_config(tmp_path, **{"model.freeze_layers": "1"})
    context = build_encoders(config, Language.EN).context
    batch = context.prepare(QUERIES)
    with torch.no_grad():
        whole = context(batch)
        states = context.bottom_states(batch)
        from_states = context(type(batch)(**{**batch.__dict__, "states": states}))
    assert states.shape[:2] == batch.input_ids.shape
    torch.testing.assert_close(from_states, whole, rtol=0, atol=1e-6)


def test_the_frozen_bottom_runs_without_dropout_while_the_top_trains(tmp_path):
    config = tiny_config(tmp_path, dropout=0.5, **{"model.freeze_layers": "1"})
    encoders = build_encoders(config, Language.EN)
    for encoder in (encoders.context, encoders.quote):
        encoder.train()
        model = encoder.model
        assert not model.embeddings.training and not model.encoder.layer[0].training
        assert model.encoder.layer[1].training
    batch = encoders.context.prepare(QUERIES)
    with torch.no_grad():
        # Two passes in training mode draw other dropout masks above the bottom, never within it.
        first, second = (encoders.context.bottom_states(batch) for _ in range(2))
        assert torch.equal(first, second)
        assert not torch.equal(encoders.context(batch), encoders.context(batch))


def test_dropout_can_be_set_for_both_models(tmp_path):
    config = tiny_config(tmp_path, dropout=0.1, **{"model.dropout": "0"})
    encoders = build_encoders(config, Language.EN)
    for encoder in (encoders.context, encoders.quote):
        probabilities = {m.p for m in encoder.model.modules() if isinstance(m, torch.nn.Dropout)}
        assert probabilities == {0.0}


def _trained(tmp_path, name: str, cached: bool, stage: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The weights before and after a stage trained for 2 epochs with 1 of 2 layers frozen and dropout on, from
    the same seed."""
    settings = {"model.freeze_layers": "1", "joint.epochs": "2", "retrain.epochs": "2", "negatives.in_batch": "true"}
    config = tiny_config(tmp_path / name, dropout=0.1, **settings)
    data = training_data(tmp_path / name / "d")
    torch.manual_seed(0)
    encoders = build_encoders(config, Language.EN)
    if stage == "joint":
        negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
        module = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
    else:
        vectors = encoders.quote.encode_records(data.records)
        module = RetrainModule(encoders.context, vectors, data.train_quote_ids, config.retrain)
    start = {key: value.clone() for key, value in module.state_dict().items()}
    kept = tmp_path / name / "kept" if cached else None
    datamodule = QuoteDataModule(data, encoders.context, 8, 16, 1, stage == "joint", kept)
    settings = config.joint if stage == "joint" else config.retrain
    run_stage(module, datamodule, settings, config.run, tmp_path / name / "run", stage)
    if cached:
        assert datamodule._collators["train"].cache is not None
    return start, {key: value.clone() for key, value in module.state_dict().items()}


def test_training_from_the_kept_states_gives_the_weights_of_training_without_them(tmp_path):
    for stage in ("joint", "retrain"):
        start, plain = _trained(tmp_path, f"{stage}-plain", cached=False, stage=stage)
        _, cached = _trained(tmp_path, f"{stage}-cached", cached=True, stage=stage)
        assert plain.keys() == cached.keys()
        assert any(not torch.equal(plain[key], start[key]) for key in plain), "training changed no weight"
        for key in plain:
            torch.testing.assert_close(cached[key], plain[key], rtol=0, atol=1e-5, msg=key)


def test_a_kept_file_is_reused_by_the_same_contexts_and_weights_only(tmp_path):
    config = tiny_config(tmp_path, **{"model.freeze_layers": "1"})
    data = training_data(tmp_path / "d")
    context = build_encoders(config, Language.EN).context
    folder = tmp_path / "kept"
    first = SampleCollator(context, data.train, folder)
    files = sorted(folder.iterdir())
    assert len(files) == 1 and files[0].suffix == ".f32"
    modified = files[0].stat().st_mtime_ns
    again = SampleCollator(context, data.train, folder)
    assert sorted(folder.iterdir()) == files and files[0].stat().st_mtime_ns == modified
    np.testing.assert_array_equal(again.cache.states, first.cache.states)
    # Other contexts, or other frozen weights: another file.
    SampleCollator(context, data.valid, folder)
    with torch.no_grad():
        context.model.encoder.layer[0].output.dense.weight.add_(0.1)
    changed = SampleCollator(context, data.train, folder)
    assert len(list(folder.iterdir())) == 3
    assert not np.array_equal(changed.cache.states, first.cache.states)
    # Each row holds its own tokens' states, in the collated batch padded with zeros.
    batch = changed([0, 5])
    lengths = batch.contexts.attention_mask.sum(1)
    assert batch.contexts.states.shape[:2] == batch.contexts.input_ids.shape
    for slot, length in enumerate(lengths.tolist()):
        assert not batch.contexts.states[slot, length:].any()
    # Without frozen layers nothing is kept.
    plain = build_encoders(tiny_config(tmp_path / "p"), Language.EN).context
    assert SampleCollator(plain, data.train, tmp_path / "none").cache is None
    assert not (tmp_path / "none").exists()


def test_the_kept_states_are_those_of_the_model(tmp_path):
    config = tiny_config(tmp_path, **{"model.freeze_layers": "1"})
    data = training_data(tmp_path / "d")
    context = build_encoders(config, Language.EN).context
    collator = SampleCollator(context, data.train, tmp_path / "kept")
    indices = [3, 0, 17]
    batch = context.collate([collator.rows[i] for i in indices])
    with torch.no_grad():
        direct = context.bottom_states(batch)
    kept = collator.cache.padded(indices, batch.input_ids.shape[1])
    mask = batch.attention_mask.bool()
    torch.testing.assert_close(kept[mask], direct[mask], rtol=0, atol=1e-6)
    assert isinstance(collator.cache, LayerCache)


def test_a_splits_vectors_read_from_the_kept_states_are_the_encoders_own(tmp_path):
    # What the fusion reads at the end of training: every context's vector from its kept states, in the
    # split's order, without dropout, and the encoder left training as it was.
    config = tiny_config(tmp_path, dropout=0.1, **{"model.freeze_layers": "1"})
    data = training_data(tmp_path / "d")
    context = build_encoders(config, Language.EN).context
    context.train()
    collator = SampleCollator(context, data.train, tmp_path / "kept")
    assert collator.cache is not None
    vectors = collator.encode(batch_size=4)
    whole = context.encode([Query(sample.left, sample.right) for sample in data.train], batch_size=7)
    assert vectors.shape == whole.shape == (len(data.train), context.model.config.hidden_size)
    assert len(np.unique(vectors.round(4), axis=0)) > 1
    np.testing.assert_allclose(vectors, whole, rtol=0, atol=1e-5)
    assert context.training and context.model.encoder.layer[1].training
    # With nothing kept, the same vectors from the whole encoder.
    np.testing.assert_allclose(SampleCollator(context, data.train).encode(batch_size=5), whole, rtol=0, atol=1e-5)
