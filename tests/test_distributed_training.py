"""Training in several processes (DDP over gloo, on the CPU): stage 1 gathers every process's gold quotes and
quote vectors and trains exactly as one process on the batches concatenated; `quoter train` in two processes
writes one bundle and logs once; the batches are shared out evenly and validation ranks as on the host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.environments.lightning import find_free_network_port
from pytorch_lightning.strategies import DDPStrategy
from torch.utils.data import DataLoader

from quoter.bundle import Bundle
from quoter.languages import Language
from quoter.metrics import ranks_from_scores
from quoter.training.batches import ResumableBatchSampler
from quoter.training.config import load_config
from quoter.training.data import SampleCollator, TrainingData
from quoter.training.joint_module import JointModule
from quoter.training.negatives import NegativeSampler
from quoter.training.pipeline import build_encoders
from quoter.training.precision import auto_precision
from quoter.training.stage_module import gold_ranks
from quoter.training.trainer import describe_hardware, hardware
from tests.training_fixtures import tiny_config, training_data, write_dataset, write_model

# Each process's batch of train samples (12 a quote, in quote order): samples 0 and 1 share their gold quote, so
# a quote is the gold of a context in each process; the batches differ in size.
RANK_BATCHES = [[0, 12, 24, 36], [1, 48, 60]]


class RankBatches(pl.LightningDataModule):
    """One training batch a process: the train samples RANK_BATCHES[rank]."""

    def __init__(self, collator: SampleCollator) -> None:
        super().__init__()
        self.collator = collator

    def train_dataloader(self) -> DataLoader:
        return DataLoader([RANK_BATCHES[self.trainer.global_rank]], batch_size=None, collate_fn=self.collator)


class Record(pl.Callback):
    """Saves each process's loss of its one step and the gradients DDP averaged to folder/RANK.pt."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.gradients: dict[str, torch.Tensor] = {}

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer) -> None:
        self.gradients = {name: p.grad.clone() for name, p in pl_module.named_parameters() if p.grad is not None}

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, *args) -> None:
        record = {"loss": outputs["loss"].detach(), "gradients": self.gradients}
        torch.save(record, self.folder / f"{trainer.global_rank}.pt")


def joint_module(config, data: TrainingData) -> JointModule:
    encoders = build_encoders(config, Language.EN)
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, seed=1)
    return JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)


@pytest.mark.parametrize(
    "settings",
    [{"negatives.in_batch": "true"}, {"negatives.hard": "1", "negatives.cache": "true"}],
    ids=["in-batch", "hard-and-cache"],
)
def test_two_processes_train_as_one_on_their_concatenated_batch(tmp_path, monkeypatch, settings):
    # Set here, the port the processes meet on goes with the test (Lightning would leave its choice set).
    monkeypatch.setenv("MASTER_PORT", str(find_free_network_port()))
    config = tiny_config(tmp_path, **settings)
    data = training_data(tmp_path / "d")
    module = joint_module(config, data).train()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        # Forked: the processes start without importing anything again.
        strategy=DDPStrategy(start_method="fork", find_unused_parameters=True),
        max_steps=1,
        limit_val_batches=0,
        callbacks=[Record(tmp_path)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(module, datamodule=RankBatches(SampleCollator(module.context_encoder, data.train)))
    ranks = [torch.load(tmp_path / f"{rank}.pt", weights_only=True) for rank in range(2)]

    alone = joint_module(config, data)
    alone.on_train_epoch_start()  # the hard negatives and the cache, as each process made them
    batch = SampleCollator(alone.context_encoder, data.train)(RANK_BATCHES[0] + RANK_BATCHES[1])
    loss = alone.batch_loss(batch, epoch=0)
    loss.backward()
    # The step's loss is the mean of the processes' (each weighed by its share of the contexts).
    assert float(ranks[0]["loss"] + ranks[1]["loss"]) / 2 == pytest.approx(loss.item(), abs=1e-5)
    expected = {name: p.grad for name, p in alone.named_parameters() if p.grad is not None}
    assert any(name.startswith("quote_encoder.") for name in expected)
    for rank in ranks:
        assert rank["gradients"].keys() == expected.keys()
        for name, gradient in expected.items():
            torch.testing.assert_close(rank["gradients"][name], gradient, rtol=1e-4, atol=1e-5, msg=name)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("model"))


def quoter_train(tmp_path: Path, data_file: Path, model: Path, output: str, *settings: str) -> list[str]:
    """Run `python -m quoter train` in two processes on the tiny data; its stderr lines."""
    settings = (
        f"model.name={model}",
        "model.context_max_length=32",
        "model.quote_max_length=16",
        "negatives.count=3",
        "negatives.in_batch=true",
        "joint.batch_size=4",
        "retrain.batch_size=4",
        "run.devices=2",
        "run.logger=none",
        "run.checkpoint_every=2",
        *settings,
    )
    sets = [arg for setting in settings for arg in ("--set", setting)]
    command = [sys.executable, "-m", "quoter", "train", "--data", str(data_file), "--output", output, *sets]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_quoter_train_in_two_processes_writes_one_bundle_and_logs_once(tmp_path, data_file, model):
    # 96 train samples in batches of 4: 12 batches a process an epoch; each stage stops and validates at step 4.
    # With run.resume=false, as the children start after the first process has made the checkpoint folder.
    settings = ("run.resume=false", "joint.max_steps=4", "retrain.max_steps=4")
    lines = quoter_train(tmp_path, data_file, model, "bundle", *settings)
    assert f"training on cpu, devices 2, precision {auto_precision()}" in lines
    once = [f"{data_file}: 96 train", "stage 1: stopped after 4 steps", "stage 2: stopped", "fusion fitted", "bundle"]
    for start in once:
        assert len([line for line in lines if line.startswith(start)]) == 1, start
    bundle = Bundle.load(tmp_path / "bundle")
    assert set(bundle.info["validation"]) == {"joint", "retrain"} and bundle.fusion is not None
    assert bundle.info["validation"]["joint"]["steps"] == 4
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bundle"]  # the checkpoints gone once written


def test_several_processes_or_machines_train_with_ddp():
    single = load_config(None, {})
    assert hardware(single.run)["strategy"] == "auto" and hardware(single.run)["num_nodes"] == 1
    processes = load_config(None, {"run.devices": "2"})
    assert hardware(processes.run)["strategy"] == "ddp_find_unused_parameters_true"
    machines = load_config(None, {"run.num_nodes": "2"})
    assert hardware(machines.run)["strategy"] == "ddp_find_unused_parameters_true"
    assert hardware(machines.run)["num_nodes"] == 2 and describe_hardware(machines.run).endswith(
        ", nodes 2, precision " + hardware(machines.run)["precision"]
    )


def test_each_process_takes_as_many_batches_and_one_process_takes_them_all():
    quote_ids = list(range(25))  # 6 batches of 4 and one of 1: one batch left out between two processes
    shares = []
    for rank in range(2):
        sampler = ResumableBatchSampler(quote_ids, 4, seed=0, distinct_quotes=False)
        sampler.rank, sampler.world_size = rank, 2
        shares.append(list(sampler))
        assert len(sampler) == len(shares[rank]) == 3
    alone = list(ResumableBatchSampler(quote_ids, 4, seed=0, distinct_quotes=False))
    assert len(alone) == 7 and shares[0] + shares[1] == alone[0:6:2] + alone[1:6:2]


def test_ranks_on_the_device_are_those_of_the_metrics():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(50, 9)).astype(np.float32)  # many ties, which count against the gold quote
    scores[3, 2] = scores[7, 0] = np.nan
    gold = rng.integers(0, 9, size=50)
    gold[3], gold[7] = 2, 1
    ranks = gold_ranks(torch.from_numpy(scores), torch.from_numpy(gold))
    np.testing.assert_array_equal(ranks.numpy(), ranks_from_scores(scores, gold))
