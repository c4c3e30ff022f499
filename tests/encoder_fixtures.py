"""Tiny BERT models built from a config, with a WordPiece vocabulary written by the test: no downloads."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "home",
    "happy",
    "un",
    "##happi",
    "##ness",
    ".",
    ",",
    "我",
    "们",
    "喜",
    "欢",
    "学",
    "习",
    "之",
    "而",
    "时",
    "不",
    "亦",
    "说",
    "乎",
    "，",
]


def tiny_tokenizer(folder: Path) -> BertTokenizerFast:
    """A lowercasing WordPiece tokenizer over SPECIALS + WORDS (Chinese characters split one per token)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    return BertTokenizerFast.from_pretrained(str(folder), do_lower_case=True)


def tiny_model(tokenizer: BertTokenizerFast, seed: int = 0) -> BertModel:
    """A 2-layer BERT with hidden size 16, random weights from `seed`, in eval mode."""
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        type_vocab_size=2,
    )
    return BertModel(config).eval()
