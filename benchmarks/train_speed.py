"""Training speed of each offline config: contexts per second of a stage-1 and a stage-2 training step
(forward, backward, AdamW update) on the dev data sets built by `make -C data`, per device. With
model.freeze_layers, the same steps are timed twice, the frozen layers run each step and kept once
(model.cache_frozen_layers), side by side. Not a test.

    python -m benchmarks.train_speed [--steps 5] [--configs configs/zh-offline.yaml ...]
        [--set model.freeze_layers=6 ...] [--device cuda] [--precision bf16]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

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
from quoter.training.retrain_module import RetrainModule
from quoter.training.stage_module import StageModule

REPO = Path(__file__).resolve().parent.parent
DATA = {
    "en-offline": REPO / "data/built/en/data.txt",
    "zh-offline": REPO / "data/built/zh-modern/data.txt",
    "zh-classical-offline": REPO / "data/built/zh-classical/data.txt",
}


def contexts_per_second(
    module: StageModule, batches: list[SampleBatch], device: torch.device, precision: str
) -> float:
    """Time a training step on each batch but the first (a warm-up), the batches made and moved to the device
    outside the timed steps, as the DataModule's loader does in training."""
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-5)
    module.train()
    moved = [batch.to(device) for batch in batches]
    elapsed = 0.0
    for index, batch in enumerate(moved):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = module.batch_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if index > 0:
            elapsed += time.perf_counter() - started
    return (len(moved) - 1) * len(moved[0]) / elapsed


def first_batches(collate: SampleCollator, batch_size: int, steps: int) -> list[SampleBatch]:
    """The first `steps + 1` batches of train samples, in file order."""
    count = len(collate.quote_ids)
    return [collate([(i * batch_size + j) % count for j in range(batch_size)]) for i in range(steps + 1)]


def measure(name: str, config: TrainConfig, data_path: Path, steps: int, device: torch.device, precision: str) -> None:
    """Print the contexts per second of both stages for one config (with frozen layers: run, and kept)."""
    dataset = load_dataset(data_path)
    language, _ = choose_language(config.data.language, None, dataset.text_sample())
    data = TrainingData.from_dataset(dataset, max_valid=1)
    torch.manual_seed(0)
    encoders = build_encoders(config, language)
    encoders.context.to(device)
    encoders.quote.to(device)
    stages = {"stage 1": config.joint, "stage 2": config.retrain}
    # Only the samples the timed steps read, so that keeping their frozen output stays quick.
    wanted = (steps + 1) * max(stage.batch_size for stage in stages.values())
    samples = data.train[:wanted]
    variants = {"": None}
    if config.model.freeze_layers and config.model.cache_frozen_layers:
        variants = {", frozen layers run": None, ", frozen layers kept": Path(tempfile.mkdtemp(prefix="quoter-kept-"))}
    vectors = encoders.quote.encode_records(data.records)
    for label, folder in variants.items():
        started = time.perf_counter()
        collate = SampleCollator(encoders.context, samples, folder)
        kept_s = time.perf_counter() - started
        negatives = NegativeSampler(data.train_quote_ids, config.negatives, config.run.seed)
        modules = {
            "stage 1": JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives),
            "stage 2": RetrainModule(encoders.context, vectors, data.train_quote_ids, config.retrain).to(device),
        }
        speeds = []
        for stage_name, module in modules.items():
            batches = first_batches(collate, stages[stage_name].batch_size, steps)
            speeds.append(f"{stage_name} {contexts_per_second(module, batches, device, precision):.1f}")
        kept = f" (kept {len(samples)} contexts in {kept_s:.1f} s)" if folder else ""
        print(f"{name}{label}: {', '.join(speeds)} contexts/s per device{kept}", flush=True)
    threads = f"{torch.get_num_threads()} threads" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(
        f"  batch {config.joint.batch_size} / {config.retrain.batch_size}, {config.negatives.count} negatives, "
        f"{len(data.train_quote_ids)} train quotes, {config.model.freeze_layers} frozen layers, dropout "
        f"{'model' if config.model.dropout is None else config.model.dropout}, {precision}, {device.type} ({threads})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per stage")
    parser.add_argument("--configs", nargs="*", type=Path, default=[REPO / f"configs/{name}.yaml" for name in DATA])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of every config")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast, as bf16-mixed")
    args = parser.parse_args()
    device = torch.device(args.device)
    for path in args.configs:
        name = path.stem
        data_path = DATA.get(name)
        if data_path is None or not data_path.is_file():
            print(f"{name}: skipped, no dev data at {data_path} (make -C data)")
            continue
        try:
            config = load_config(path, parse_assignments(args.set))
            measure(name, config, data_path, args.steps, device, args.precision)
        except QuoterError as error:
            print(f"{name}: skipped, {error}")


if __name__ == "__main__":
    main()
