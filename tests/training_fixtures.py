"""A tiny learnable dataset and tiny encoders for training tests: each quote has a key word, and its
contexts contain that word among filler words, so a trained model can find the quote from the context."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from quoter.datasets import load_dataset
from quoter.training.config import TrainConfig, load_config
from quoter.training.data import TrainingData
from tests.encoder_fixtures import tiny_model, tiny_tokenizer

KEYS = ["cat", "dog", "sat", "mat", "ran", "home", "happy", "on"]
HELD_OUT_KEYS = ["un", "我"]  # quotes that occur only in valid and test
FILLER = ["the", "a", ",", "."]
TRAIN_PER_QUOTE = 12
INIT_RANGE = 0.2


def _context(rng: np.random.Generator, key: str) -> tuple[str, str]:
    words = [str(w) for w in rng.choice(FILLER, size=4)]
    words.insert(int(rng.integers(0, 3)), key)
    return " ".join(words[:2]), " ".join(words[2:])


def write_dataset(folder: Path) -> Path:
    """data.tsv and splits.json: train 12 contexts per key quote, valid and test 2 each, plus two quotes that
    occur only in valid and test."""
    rng = np.random.default_rng(0)
    quotes = {key: f"{key} {key} ." for key in KEYS + HELD_OUT_KEYS}
    splits = {
        "train": [(key, n) for key in KEYS for n in range(TRAIN_PER_QUOTE)],
        "valid": [(key, n) for key in KEYS + HELD_OUT_KEYS[:1] for n in range(2)],
        "test": [(key, n) for key in KEYS + HELD_OUT_KEYS for n in range(2)],
    }
    lines, ranges, start = [], {}, 0
    for name, pairs in splits.items():
        for key, _ in pairs:
            left, right = _context(rng, key)
            lines.append(f"{left}\t{quotes[key]}\t{right}")
        ranges[name] = [start, start + len(pairs)]
        start += len(pairs)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "splits.json").write_text(json.dumps(ranges), encoding="utf-8")
    return folder / "data.tsv"


def write_model(folder: Path, seed: int = 0, init_range: float = INIT_RANGE, dropout: float = 0.0) -> Path:
    """A tiny BERT and its tokenizer saved as a local model folder. Its weights are drawn wider than BERT's
    0.02, which stands in for pretraining: otherwise every input gets nearly the same vector and a few
    steps cannot learn anything."""
    tokenizer = tiny_tokenizer(folder)
    model = tiny_model(tokenizer, seed)
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = dropout
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.copy_(torch.randn(weight.shape, generator=generator) * init_range)
    model.save_pretrained(folder)
    return folder


def training_data(folder: Path) -> TrainingData:
    """The tiny dataset, split for training."""
    return TrainingData.from_dataset(load_dataset(write_dataset(folder)))


def tiny_config(tmp: Path, dropout: float = 0.0, **overrides: str) -> TrainConfig:
    """Fast settings: tiny model, 3 negatives, batch 4, high learning rate, no logger or progress bar."""
    settings = {
        "model.context_max_length": "32",
        "model.quote_max_length": "16",
        "negatives.count": "3",
        "joint.batch_size": "4",
        "joint.epochs": "1",
        "joint.lr": "0.003",
        "retrain.batch_size": "4",
        "retrain.epochs": "1",
        "retrain.lr": "0.003",
        "run.logger": "none",
        "run.progress_bar": "false",
        "run.checkpoint_every": "2",
        **overrides,
    }
    values = {
        "data.path": str(write_dataset(tmp / "data")),
        "model.name": str(write_model(tmp / "model", dropout=dropout)),
        "run.output": str(tmp / "bundle"),
    }
    return load_config(None, settings, values)
