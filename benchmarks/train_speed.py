"""Training speed of each offline config: contexts per second of a stage-1 and a stage-2 training step
(forward, backward, AdamW update) on the dev data sets built by `make -C data` (quotes read with their glosses;
contexts drawn at random, so that a batch mixes lengths as in training), per device. The variants are timed
side by side, step by step on the same batches: float32 and bf16 mixed (run.precision=bf16-mixed; on a CPU
fast with AMX), and with model.freeze_layers the frozen layers run each step or kept once
(model.cache_frozen_layers); each against the first (run, float32).
Not a test.

    python -m benchmarks.train_speed [--steps 8] [--configs configs/zh-offline.yaml ...]
        [--set model.freeze_layers=6 ...] [--device cuda] [--precision bf16-mixed]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from quoter.datasets import load_dataset
from quoter.errors import QuoterError
from quoter.languages import choose_language
from quoter.settings import parse_assignments
from quoter.training.config import TrainConfig, load_config
from quoter.training.data import SampleBatch, SampleCollator, TrainingData
from quoter.training.joint_module import JointModule
from quoter.training.negatives import NegativeSampler
from quoter.training.pipeline import build_encoders
from quoter.training.precision import training_attention
from quoter.training.retrain_module import RetrainModule
from quoter.training.stage_module import StageModule

REPO = Path(__file__).resolve().parent.parent
FLOAT32 = "32-true"
BF16 = "bf16-mixed"
# Each config's dev set, and the glosses its README command gives it.
DATA = {
    "en-offline": (REPO / "data/built/en/data.txt", None),
    "zh-offline": (REPO / "data/built/zh-modern/data.txt", REPO / "data/built/zh-modern/glosses.tsv"),
    "zh-classical-offline": (REPO / "data/built/zh-classical/data.txt", REPO / "data/built/zh-classical/glosses.tsv"),
}


@dataclass
class Variant:
    """One way of training timed: its module and optimizer per stage, its batches and precision."""

    label: str
    modules: dict[str, StageModule]
    batches: dict[str, list[SampleBatch]]
    precision: str
    optimizers: dict[str, torch.optim.Optimizer] = field(init=False)
    seconds: dict[str, list[float]] = field(init=False)

    def __post_init__(self) -> None:
        trainable = {name: [p for p in module.parameters() if p.requires_grad] for name, module in self.modules.items()}
        self.optimizers = {name: torch.optim.AdamW(params, lr=1e-5, fused=True) for name, params in trainable.items()}
        self.seconds = {name: [] for name in self.modules}

    def step(self, stage: str, index: int, device: torch.device) -> float:
        """Seconds of one training step of `stage` on batch `index`."""
        module, optimizer = self.modules[stage], self.optimizers[stage]
        batch = self.batches[stage][index]
        on_cpu = device.type == "cpu"
        bf16 = "bf16" in self.precision
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with training_attention(module, on_cpu, self.precision), torch.autocast(device.type, torch.bfloat16, bf16):
            loss = module.batch_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started


def first_batches(collate: SampleCollator, batch_size: int, steps: int, device: torch.device) -> list[SampleBatch]:
    """The first `steps + 1` batches of the collator's samples, on the device (moved outside the timed steps, as
    the DataModule's loader does in training)."""
    count = len(collate.quote_ids)
    return [collate([(i * batch_size + j) % count for j in range(batch_size)]).to(device) for i in range(steps + 1)]


def measure(name: str, config: TrainConfig, steps: int, device: torch.device, precision: str) -> None:
    """Print the contexts per second of both stages for one config, each variant against the first."""
    data_path, glosses = DATA[name]
    dataset = load_dataset(data_path, glosses=glosses)
    language, _ = choose_language(config.data.language, None, dataset.text_sample())
    data = TrainingData.from_dataset(dataset, max_valid=1)
    torch.manual_seed(0)
    encoders = build_encoders(config, language)
    encoders.context.to(device)
    encoders.quote.to(device)
    stages = {"stage 1": config.joint, "stage 2": config.retrain}
    # Only the samples the timed steps read, so that keeping their frozen output stays quick; drawn at random,
    # so that a batch mixes lengths as in training.
    count = (steps + 1) * max(stage.batch_size for stage in stages.values())
    samples = [data.train[i] for i in np.random.default_rng(0).permutation(len(data.train))[:count]]
    keeping = {"": None}
    if config.model.freeze_layers and config.model.cache_frozen_layers:
        keeping = {"frozen layers run, ": None, "frozen layers kept, ": Path(tempfile.mkdtemp(prefix="quoter-kept-"))}
    vectors = encoders.quote.encode_records(data.records)
    variants = []
    for kept_label, folder in keeping.items():
        collate = SampleCollator(encoders.context, samples, folder)
        batches = {stage: first_batches(collate, stages[stage].batch_size, steps, device) for stage in stages}
        negatives = NegativeSampler(data.train_quote_ids, config.negatives, config.run.seed)
        for chosen in dict.fromkeys((FLOAT32, precision)):
            modules = {
                "stage 1": JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives),
                "stage 2": RetrainModule(encoders.context, vectors, data.train_quote_ids, config.retrain).to(device),
            }
            variants.append(Variant(f"{kept_label}{chosen}", modules, batches, chosen))
    for module in (encoders.context, encoders.quote):
        module.train()
    # Interleaved, so that a slower spell of the machine falls on every variant alike; the first step of each
    # is a warm-up.
    for index in range(steps + 1):
        for variant in variants:
            for stage in stages:
                seconds = variant.step(stage, index, device)
                if index > 0:
                    variant.seconds[stage].append(seconds)
    first = variants[0]
    for variant in variants:
        speeds = []
        for stage in stages:
            median = statistics.median(variant.seconds[stage])
            ratio = statistics.median(first.seconds[stage]) / median
            speeds.append(f"{stage} {stages[stage].batch_size / median:.1f} ({ratio:.2f}x)")
        print(f"{name}, {variant.label}: {', '.join(speeds)} contexts/s per device", flush=True)
    threads = f"{torch.get_num_threads()} threads" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(
        f"  batch {config.joint.batch_size} / {config.retrain.batch_size}, {config.negatives.count} negatives, "
        f"{len(data.train_quote_ids)} train quotes, {config.model.freeze_layers} frozen layers, dropout "
        f"{'model' if config.model.dropout is None else config.model.dropout}, {device.type} ({threads}), "
        f"median of {steps} steps after a warm-up"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="timed steps per stage")
    parser.add_argument("--configs", nargs="*", type=Path, default=[REPO / f"configs/{name}.yaml" for name in DATA])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of every config")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=(FLOAT32, BF16), default=BF16, help="timed beside float32")
    args = parser.parse_args()
    device = torch.device(args.device)
    for path in args.configs:
        name = path.stem
        data_path = DATA.get(name, (None,))[0]
        if data_path is None or not data_path.is_file():
            print(f"{name}: skipped, no dev data at {data_path} (make -C data)")
            continue
        try:
            config = load_config(path, parse_assignments(args.set))
            measure(name, config, args.steps, device, args.precision)
        except QuoterError as error:
            print(f"{name}: skipped, {error}")


if __name__ == "__main__":
    main()
