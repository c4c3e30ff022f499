"""Training speed of each offline config: contexts per second of a stage-1 and a stage-2 training step
(forward, backward, AdamW update) on the dev data sets built by `make -C data`. Not a test.

    python benchmarks/train_speed.py [--steps 5] [--configs configs/en-offline.yaml ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from quoter.datasets import load_dataset
from quoter.errors import QuoterError
from quoter.languages import choose_language
from quoter.training.config import TrainConfig, load_config
from quoter.training.data import SampleCollator, TrainingData
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


def contexts_per_second(module: StageModule, collate: SampleCollator, batch_size: int, steps: int) -> float:
    """Time `steps` training steps (after one warm-up step) over the first train samples, batched (and padded)
    outside the timed step, as the DataModule's loader does in training."""
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-5)
    module.train()
    count = len(collate.quote_ids)
    batches = [collate([(i * batch_size + j) % count for j in range(batch_size)]) for i in range(steps + 1)]
    elapsed = 0.0
    for index, batch in enumerate(batches):
        started = time.perf_counter()
        loss = module.batch_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if index > 0:
            elapsed += time.perf_counter() - started
    return steps * batch_size / elapsed


def measure(name: str, config: TrainConfig, data_path: Path, steps: int) -> None:
    """Print the contexts per second of both stages for one config."""
    dataset = load_dataset(data_path)
    language, _ = choose_language(config.data.language, None, dataset.text_sample())
    data = TrainingData.from_dataset(dataset, max_valid=1)
    torch.manual_seed(0)
    encoders = build_encoders(config, language)
    negatives = NegativeSampler(data.train_quote_ids, config.negatives, config.run.seed)
    collate = SampleCollator(encoders.context, data.train)
    joint = JointModule(encoders.context, encoders.quote, data.records, config.joint, negatives)
    speed_1 = contexts_per_second(joint, collate, config.joint.batch_size, steps)
    retrain = RetrainModule(encoders.context, encoders.quote.encode(data.quotes), data.train_quote_ids, config.retrain)
    speed_2 = contexts_per_second(retrain, collate, config.retrain.batch_size, steps)
    print(
        f"{name}: stage 1 {speed_1:.1f} contexts/s (batch {config.joint.batch_size}, {config.negatives.count} "
        f"negatives), stage 2 {speed_2:.1f} contexts/s (batch {config.retrain.batch_size}, "
        f"{len(data.train_quote_ids)} quotes); {torch.get_num_threads()} threads"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per stage")
    parser.add_argument("--configs", nargs="*", type=Path, default=[REPO / f"configs/{name}.yaml" for name in DATA])
    args = parser.parse_args()
    for path in args.configs:
        name = path.stem
        data_path = DATA.get(name)
        if data_path is None or not data_path.is_file():
            print(f"{name}: skipped, no dev data at {data_path} (make -C data)")
            continue
        try:
            measure(name, load_config(path), data_path, args.steps)
        except QuoterError as error:
            print(f"{name}: skipped, {error}")


if __name__ == "__main__":
    main()
