"""Training: each stage learns a planted pattern, negatives stay inside the train quotes, in-batch batches
never repeat a quote, an interrupted run resumes to the same weights, and the bundle reproduces its ranks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from quoter.bundle import Bundle
from quoter.datasets import QuoteDataset
from quoter.encoders.configs import ContextEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.pooling import PoolingMode
from quoter.errors import QuoterError
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.methods import MethodOptions, build_ranker
from quoter.metrics import rank_metrics, ranks_from_scores
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from quoter.training.batches import shuffled_batches
from quoter.training.config import NegativeConfig, StageConfig
from quoter.training.data import QuoteDataModule, SampleCollator, TrainingData
from quoter.training.joint_module import JointModule
from quoter.training.negatives import NegativeSampler
from quoter.training.pipeline import build_encoders, checkpoint_folder, train
from quoter.training.resume import LAST_CHECKPOINT
from quoter.training.retrain_module import RetrainModule
from quoter.training.trainer import BEST_FOLDER, run_stage
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.training_fixtures import HELD_OUT_KEYS, tiny_config, training_data


def valid_mrr(encoders, data: TrainingData, quote_vectors: np.ndarray) -> float:
    queries = [Query(s.left, s.right) for s in data.valid]
    scores = encoders.context.encode(queries) @ quote_vectors.T
    return rank_metrics(ranks_from_scores(scores, [s.quote_id for s in data.valid]))["mrr"]


def mean_loss(module, data: TrainingData, **kwargs) -> float:
    module.eval()
    batch = SampleCollator(module.context_encoder, data.train)(list(range(len(data.train))))
    with torch.no_grad():
        return float(module.batch_loss(batch, **kwargs))


def test_stage_one_lowers_the_loss_and_raises_the_validation_mrr(tmp_path):
    config = tiny_config(tmp_path)
    data = training_data(tmp_path / "d")
    torch.manual_seed(0)
    encoders = build_encoders(config, Language.EN)
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
    module = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
    loss_before = mean_loss(module, data, epoch=0)
    mrr_before = valid_mrr(encoders, data, encoders.quote.encode(data.quotes))
    datamodule = QuoteDataModule(data, encoders.context, 4, 16, 1, distinct_quotes=False)
    metrics = run_stage(module, datamodule, config.joint, config.run, tmp_path / "run", "joint")
    assert mean_loss(module, data, epoch=0) < loss_before
    mrr_after = valid_mrr(encoders, data, encoders.quote.encode(data.quotes))
    assert mrr_after > mrr_before + 0.1
    assert metrics["val_mrr"] == pytest.approx(mrr_after, abs=1e-5)  # the best checkpoint is the one kept


def test_stage_two_trains_the_same_context_encoder_against_frozen_quotes(tmp_path):
    config = tiny_config(tmp_path)
    data = training_data(tmp_path / "d")
    torch.manual_seed(0)
    encoders = build_encoders(config, Language.EN)
    quote_vectors = encoders.quote.encode(data.quotes)
    quote_weights = {k: v.clone() for k, v in encoders.quote.state_dict().items()}
    module = RetrainModule(encoders.context, quote_vectors, data.train_quote_ids, config.retrain)
    assert module.context_encoder is encoders.context
    loss_before = mean_loss(module, data)
    mrr_before = valid_mrr(encoders, data, quote_vectors)
    datamodule = QuoteDataModule(data, encoders.context, 4, 16, 1, False)
    run_stage(module, datamodule, config.retrain, config.run, tmp_path / "run", "re")
    assert mean_loss(module, data) < loss_before
    assert valid_mrr(encoders, data, quote_vectors) > mrr_before + 0.1
    for key, value in encoders.quote.state_dict().items():
        assert torch.equal(value, quote_weights[key]), key


def test_negatives_come_only_from_train_quotes(tmp_path):
    data = training_data(tmp_path)
    held_out = {data.quotes.index(f"{key} {key} .") for key in HELD_OUT_KEYS}
    assert held_out and not held_out & set(data.train_quote_ids.tolist())
    sampler = NegativeSampler(data.train_quote_ids, NegativeConfig(count=5, in_batch=True, hard=2, hard_pool=3), 0)
    rng = np.random.default_rng(0)
    sampler.mine(rng.normal(size=(len(data.train_quote_ids), 4)), epoch=0)
    golds = [s.quote_id for s in data.train]
    negatives = sampler.sample(list(range(len(golds))), golds, epoch=0)
    assert negatives.shape == (len(golds), 5)
    assert not held_out & set(negatives.ravel().tolist())
    for gold, row in zip(golds, negatives):
        assert gold not in row and len(set(row)) == 5
    # Stage 2's softmax runs over the train quotes only.
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer")
    context = ContextEncoder(tiny_model(tokenizer), tokenizer, ContextEncoderConfig(max_length=32))
    vectors = np.arange(len(data.quotes) * 16, dtype=np.float32).reshape(len(data.quotes), 16)
    module = RetrainModule(context, vectors, data.train_quote_ids, StageConfig())
    kept = [row for row in range(len(data.quotes)) if row not in held_out]
    np.testing.assert_array_equal(module.train_quote_vectors.numpy(), vectors[kept])


def test_hard_negatives_are_the_quotes_nearest_the_gold_quote_in_the_mined_vectors():
    pool = np.array([0, 2, 3, 5, 7, 8])  # train quote ids
    positions = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 30.0])  # quotes on a line; near in position = near in vector
    vectors = np.stack([np.cos(positions / 20), np.sin(positions / 20)], axis=1)
    sampler = NegativeSampler(pool, NegativeConfig(count=2, hard=2, hard_pool=2), seed=0)
    sampler.mine(vectors, epoch=0)
    negatives = sampler.sample([0, 1, 2], [0, 5, 8], epoch=0)
    assert [sorted(row) for row in negatives.tolist()] == [[2, 3], [3, 7], [5, 7]]
    with pytest.raises(RuntimeError, match="epoch 1"):  # mined again each epoch, never silently stale
        sampler.sample([0], [0], epoch=1)
    # A batch with as many other quotes as negatives still leaves the hard negatives their places.
    both = NegativeSampler(pool, NegativeConfig(count=3, in_batch=True, hard=2, hard_pool=2), seed=0)
    both.mine(vectors, epoch=0)
    first = both.sample([0, 1, 2, 3], [0, 5, 7, 8], epoch=0)[0].tolist()
    assert first[0] in {5, 7, 8} and sorted(first[1:]) == [2, 3]


def test_hard_negatives_can_pass_over_the_nearest_quotes():
    pool = np.array([0, 2, 3, 5, 7, 8])
    positions = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 30.0])
    vectors = np.stack([np.cos(positions / 20), np.sin(positions / 20)], axis=1)
    sampler = NegativeSampler(pool, NegativeConfig(count=2, hard=2, hard_pool=2, hard_skip=1), seed=0)
    sampler.mine(vectors, epoch=0)
    # Quote 0's nearest are 2, 3, 5, 7: the nearest (2) is passed over, then 3 and 5.
    assert [sorted(row) for row in sampler.sample([0, 1], [0, 8], epoch=0).tolist()] == [[3, 5], [3, 5]]


def test_lower_layers_can_be_frozen_and_the_quote_encoder_given_its_own_learning_rate(tmp_path):
    config = tiny_config(tmp_path, **{"model.freeze_layers": "1", "joint.quote_lr": "1e-3"})
    encoders = build_encoders(config, Language.EN)
    for encoder in (encoders.context, encoders.quote):
        model = encoder.model
        assert not any(p.requires_grad for p in model.embeddings.parameters())
        assert not any(p.requires_grad for p in model.encoder.layer[0].parameters())
        assert all(p.requires_grad for p in model.encoder.layer[1].parameters())
    data = training_data(tmp_path / "d")
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
    module = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
    context_group, quote_group = module.parameter_groups()
    assert quote_group["lr"] == 1e-3 and "lr" not in context_group
    assert {id(p) for p in quote_group["params"]} == {id(p) for p in encoders.quote.parameters() if p.requires_grad}
    too_many = tiny_config(tmp_path, **{"model.freeze_layers": "99"})
    with pytest.raises(QuoterError, match="freeze_layers: the model has"):
        build_encoders(too_many, Language.EN)


def test_the_vector_cache_adds_every_other_train_quote_to_the_softmax_without_gradients(tmp_path):
    data = training_data(tmp_path / "d")
    config = tiny_config(tmp_path, **{"negatives.count": "3", "negatives.cache": "true"})
    encoders = build_encoders(config, Language.EN)
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
    module = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
    module.eval()
    pool = negatives.pool.tolist()
    negatives.mine(encoders.quote.encode([data.quotes[q] for q in pool]), epoch=0)
    ids = torch.arange(4)
    batch = SampleCollator(encoders.context, data.train)(ids.tolist())
    cached_loss = module.batch_loss(batch, epoch=0)
    # The loss over all train quotes, computed directly: the gold quote's softmax over the whole pool.
    with torch.no_grad():
        contexts = module.context_encoder(batch.contexts)
        scores = contexts @ negatives.cached_vectors.T
        gold_rows = [pool.index(data.train[i].quote_id) for i in ids.tolist()]
        expected = torch.nn.functional.cross_entropy(scores, torch.tensor(gold_rows))
    assert float(cached_loss.detach()) == pytest.approx(float(expected), rel=1e-4)
    cached_loss.backward()
    assert negatives.cached_vectors.grad is None  # the cache carries no gradient to the quote encoder


def test_in_batch_sampler_never_repeats_a_quote_in_a_batch():
    quote_ids = [0] * 9 + [1] * 5 + list(range(2, 30))
    batches = shuffled_batches(quote_ids, batch_size=8, seed=3, epoch=1, distinct=True)
    assert sorted(i for batch in batches for i in batch) == list(range(len(quote_ids)))
    for batch in batches:
        assert max(Counter(quote_ids[i] for i in batch).values()) == 1
    plain = shuffled_batches(quote_ids, batch_size=8, seed=3, epoch=1, distinct=False)
    assert any(max(Counter(quote_ids[i] for i in batch).values()) > 1 for batch in plain)


class Killed(Exception):
    """Stands for the process being killed."""


class WatchedJointModule(JointModule):
    """Stopped (as if killed) when it reaches step `kill_at`; keeps its weights as training leaves them,
    before the stage loads its best ones."""

    def __init__(self, *args, kill_at: int | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kill_at = kill_at
        self.trained: dict[str, torch.Tensor] = {}

    def training_step(self, batch, batch_idx):
        if self.global_step == self.kill_at:
            raise Killed
        return super().training_step(batch, batch_idx)

    def on_train_end(self) -> None:
        self.trained = {key: value.clone() for key, value in self.state_dict().items()}


def _joint_run(tmp_path, config, folder, kill_at=None):
    data = training_data(tmp_path / "d")
    torch.manual_seed(0)
    encoders = build_encoders(config, Language.EN)
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
    module = WatchedJointModule(
        encoders.context, encoders.quote, data.records, config.joint, negatives, kill_at=kill_at
    )
    datamodule = QuoteDataModule(data, encoders.context, config.joint.batch_size, 16, 1, config.negatives.in_batch)
    run_stage(module, datamodule, config.joint, config.run, folder, "joint")
    return module


WORD_EMBEDDINGS = "context_encoder.model.embeddings.word_embeddings.weight"


@pytest.mark.parametrize(("accumulate", "kill_at", "freeze", "cache"), [(1, 15, False, False), (2, 9, True, True)])
def test_an_interrupted_run_resumes_to_the_same_weights(tmp_path, accumulate, kill_at, freeze, cache):
    # 96 samples in batches of 8: 12 batches an epoch; checkpoints every 2 optimizer steps; killed in the
    # middle of the second epoch (after its hard negatives were mined again), so it resumes from the step
    # before. With gradients accumulated over 2 batches, no checkpoint may fall between the two.
    # Dropout is on, so the random number generators must be restored too; so must the epoch's vector cache.
    settings = {"joint.epochs": "2", "joint.batch_size": "8", "negatives.in_batch": "true", "negatives.hard": "1"}
    settings["run.accumulate_grad_batches"] = str(accumulate)
    settings["model.freeze_word_embeddings"] = str(freeze).lower()
    settings["negatives.cache"] = str(cache).lower()
    config = tiny_config(tmp_path, dropout=0.1, **settings)
    straight = _joint_run(tmp_path, config, tmp_path / "straight")
    # Killed twice at the same step: the resumed run must not leave a checkpoint behind mid-accumulation.
    for _ in range(2):
        with pytest.raises(Killed):
            _joint_run(tmp_path, config, tmp_path / "killed", kill_at=kill_at)
        saved = torch.load(tmp_path / "killed" / LAST_CHECKPOINT, weights_only=True)
        assert saved["global_step"] == kill_at - 1
        # Frozen weights are the pretrained ones, which the checkpoint need not copy.
        assert (WORD_EMBEDDINGS in saved["state_dict"]) is not freeze
    resumed = _joint_run(tmp_path, config, tmp_path / "killed")
    assert straight.trained.keys() == resumed.trained.keys() and WORD_EMBEDDINGS in resumed.trained
    for key in straight.trained:
        assert torch.equal(straight.trained[key], resumed.trained[key]), key
    # A finished stage is never resumed: its best weights stay, its last state goes.
    assert not (tmp_path / "killed" / LAST_CHECKPOINT).exists()
    assert (tmp_path / "killed" / BEST_FOLDER / "best.ckpt").is_file()


def test_the_pipeline_writes_a_bundle_that_ranks_the_same_after_loading(tmp_path):
    config = tiny_config(tmp_path, **{"fusion.enabled": "false"})
    bundle = train(config, log=lambda message: None)
    assert not checkpoint_folder(config).exists()  # the bundle written, the checkpoints are of no more use
    loaded = Bundle.load(config.run.output)
    queries = [Query("the cat", "a ."), Query("dog", "")]
    np.testing.assert_allclose(
        bundle_ranker(loaded).score(queries), bundle_ranker(bundle).score(queries), rtol=1e-5, atol=1e-6
    )
    assert loaded.info["trained"] is True and set(loaded.info["validation"]) == {"joint", "retrain"}
    assert len(loaded.quotes) == len(bundle.quotes) == 10
    # Evaluated on a data file whose quote set is in another order and has a quote the bundle lacks.
    new_quote = "the cat ran home"
    other = QuoteDataset(path=Path("other.tsv"), quotes=[*reversed(bundle_texts(bundle)), new_quote], samples=[])
    scores = build_ranker("bundle", other, MethodOptions(bundle=config.run.output)).score(queries)
    expected = bundle_ranker(bundle).score(queries)[:, ::-1]
    np.testing.assert_allclose(scores[:, :-1], expected, rtol=1e-5, atol=1e-6)
    new_vector = bundle.quote_encoder.encode([new_quote])[0]
    np.testing.assert_allclose(scores[:, -1], bundle.context_encoder.encode(queries) @ new_vector, rtol=1e-5, atol=1e-6)


def test_a_hybrid_bundle_keeps_its_fitted_fusion_and_known_contexts(tmp_path):
    config = tiny_config(tmp_path, **{"joint.max_steps": "2", "retrain.enabled": "false"})
    messages: list[str] = []
    bundle = train(config, log=messages.append)
    fitted = bundle.info["fusion"]
    # The valid MRRs recorded are the bundle's own on the valid contexts, fused and by the dense score alone;
    # the fitted fusion beats the dense score (a weight above 0 is only fitted when it does).
    valid = training_data(tmp_path / "same-data").valid
    valid_queries, gold = [Query(s.left, s.right) for s in valid], [s.quote_id for s in valid]
    dense_scores = bundle.context_encoder.encode(valid_queries) @ bundle.quote_vectors.T
    fused_scores = bundle_ranker(bundle).score(valid_queries)
    assert fitted["valid_mrr_dense"] == pytest.approx(np.mean(1.0 / ranks_from_scores(dense_scores, gold)))
    assert fitted["valid_mrr"] == pytest.approx(np.mean(1.0 / ranks_from_scores(fused_scores, gold)))
    assert fitted["valid_mrr"] > fitted["valid_mrr_dense"]
    assert any("fusion fitted on valid (zscore" in message for message in messages)
    # Each context of the tiny set names its quote's key word, so BM25 and CRM get weight.
    assert bundle.fusion is not None and bundle.fusion.weights["bm25"] + bundle.fusion.weights["crm"] > 0
    loaded = Bundle.load(config.run.output)
    assert loaded.fusion == bundle.fusion and loaded.known_contexts == bundle.known_contexts
    assert len(loaded.known_contexts) == 96
    # knn's vectors are the known contexts encoded by the trained context encoder.
    known = [Query(sample.left, sample.right) for sample in bundle.known_contexts]
    np.testing.assert_allclose(loaded.known_vectors, bundle.context_encoder.encode(known), rtol=1e-5, atol=1e-6)
    assert set(fitted["valid_mrr_alone"]) == {"dense", "bm25", "crm", "knn"}
    queries = [Query("the cat", "a ."), Query("dog", "")]
    np.testing.assert_allclose(
        bundle_ranker(loaded).score(queries), bundle_ranker(bundle).score(queries), rtol=1e-5, atol=1e-6
    )
    assert [bundle_texts(loaded)[row] for row in bundle_ranker(loaded).score(queries).argmax(axis=1)] == [
        "cat cat .",
        "dog dog .",
    ]
    # A data file that glosses the bundle's quotes anew is ranked with the records the fusion was fitted on.
    glossed = {text: QuoteRecord(text, "", "dog dog dog") for text in bundle_texts(bundle)}
    same_quotes = QuoteDataset(path=Path("same.tsv"), quotes=bundle_texts(bundle), samples=[], details=glossed)
    fused = build_ranker("bundle", same_quotes, MethodOptions(bundle=config.run.output)).score(queries)
    np.testing.assert_allclose(fused, bundle_ranker(bundle).score(queries), rtol=1e-5, atol=1e-6)
    # --dense-only ranks by the trained model's inner product alone.
    dense = build_ranker("bundle", same_quotes, MethodOptions(bundle=config.run.output, dense_only=True))
    expected = bundle.context_encoder.encode(queries) @ bundle.quote_vectors.T
    np.testing.assert_allclose(dense.score(queries), expected, rtol=1e-5, atol=1e-6)


def bundle_texts(bundle: Bundle) -> list[str]:
    return [quote.text for quote in bundle.quotes]


def test_without_stage_one_the_untrained_sememe_embeddings_are_left_out(tmp_path):
    missing = str(tmp_path / "no-such-lexicon.txt")
    encoders = build_encoders(
        tiny_config(tmp_path, **{"joint.enabled": "false", "sememes.source": missing}), Language.EN
    )
    assert encoders.quote.annotator is None and encoders.quote.sememe_embeddings is None
    with pytest.raises(QuoterError, match="no-such-lexicon"):  # with stage 1 on, the lexicon is read
        build_encoders(tiny_config(tmp_path / "on", **{"sememes.source": missing}), Language.EN)


def test_training_from_mean_pooling_with_glosses_keeps_both_in_the_bundle(tmp_path):
    glosses = tmp_path / "glosses.tsv"
    glosses.write_text("quote\tsource\tgloss\ncat cat .\tA book\thappy dog on the mat\n", encoding="utf-8")
    config = tiny_config(
        tmp_path,
        **{"model.pooling": "mean", "model.gloss": "true", "data.glosses": str(glosses), "retrain.enabled": "false"},
    )
    bundle = train(config, log=lambda message: None)
    loaded = Bundle.load(config.run.output)
    assert loaded.context_encoder.config.pooling.mode is PoolingMode.MEAN
    assert loaded.quote_encoder.config.pooling.mode is PoolingMode.MEAN and loaded.quote_encoder.config.gloss
    cat = next(quote for quote in loaded.quotes if quote.text == "cat cat .")
    assert (cat.source, cat.gloss) == ("A book", "happy dog on the mat")
    # The frozen vectors were encoded with the gloss: the same quote without it gets another vector.
    row = bundle_texts(loaded).index("cat cat .")
    with_gloss = loaded.quote_encoder.encode_records([cat])[0]
    np.testing.assert_allclose(loaded.quote_vectors[row], with_gloss, rtol=1e-5, atol=1e-6)
    assert not np.allclose(loaded.quote_encoder.encode(["cat cat ."])[0], with_gloss, atol=1e-4)
    queries = [Query("the cat", "")]
    np.testing.assert_allclose(bundle_ranker(loaded).score(queries), bundle_ranker(bundle).score(queries), rtol=1e-5)


def test_a_step_limit_within_the_first_epoch_still_validates_and_keeps_the_best_weights(tmp_path):
    # 96 train samples in batches of 4: 24 batches an epoch, stopped after 3 (stage 1) and 2 (stage 2).
    settings = {"joint.max_steps": "3", "retrain.max_steps": "2", "run.keep_checkpoints": "true"}
    config = tiny_config(tmp_path, **settings)
    bundle = train(config, log=lambda message: None)
    assert bundle.info["validation"]["joint"]["steps"] == 3 and bundle.info["validation"]["retrain"]["steps"] == 2
    # The bundle keeps the context encoder of the stage with the better best MRR, both stages having ranked the
    # valid contexts against the quote vectors the bundle holds: its valid MRR is that stage's.
    validation = bundle.info["validation"]
    best = max(validation["joint"]["val_mrr"], validation["retrain"]["val_mrr"])
    assert (validation["retrain"]["val_mrr"] < best) is validation["retrain"].get("kept_stage_one", False)
    valid = training_data(tmp_path / "same-data").valid
    scores = bundle.context_encoder.encode([Query(s.left, s.right) for s in valid]) @ bundle.quote_vectors.T
    assert np.mean(1.0 / ranks_from_scores(scores, [s.quote_id for s in valid])) == pytest.approx(best)
    # Kept as asked: what a finished run needs, each stage's best weights, and no last states.
    folder = checkpoint_folder(config)
    assert sorted(str(path.relative_to(folder)) for path in folder.rglob("*.*")) == [
        "config.json",
        "joint/best/best.ckpt",
        "joint/done.json",
        "retrain/best/best.ckpt",
        "retrain/done.json",
    ]


def test_validation_every_n_steps_logs_the_minutes_since_the_run_started(tmp_path):
    # 24 batches an epoch: stage 1 validates at steps 5 and 10 (the 2 steps to its limit train unvalidated),
    # stage 2 every 8 of its 24.
    settings = {
        "joint.max_steps": "12",
        "joint.validate_every": "5",
        "retrain.validate_every": "8",
        "run.logger": "csv",
        "fusion.enabled": "false",
    }
    config = tiny_config(tmp_path, **settings)
    train(config, log=lambda message: None)
    validations = {}
    for stage in ("joint", "retrain"):
        rows = (checkpoint_folder(config) / stage / "logs" / "version_0" / "metrics.csv").read_text().splitlines()
        header = rows[0].split(",")
        logged = [dict(zip(header, row.split(","))) for row in rows[1:]]
        validations[stage] = [row for row in logged if row["val_mrr"]]
    assert [int(row["step"]) + 1 for row in validations["joint"]] == [5, 10]
    assert [int(row["step"]) + 1 for row in validations["retrain"]] == [8, 16, 24]
    minutes = [float(row["minutes"]) for stage in ("joint", "retrain") for row in validations[stage]]
    # Counted from the run's start, not each stage's: they only grow.
    assert all(0 < earlier < later for earlier, later in zip(minutes, minutes[1:]))
