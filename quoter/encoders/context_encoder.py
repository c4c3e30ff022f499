"""The context encoder: `[CLS] left [MASK] right [SEP]` through a pretrained encoder, vector = the final
hidden state at the [MASK] (the paper's Eq. 3); or `[CLS] left [SEP] right [SEP]` and the [CLS] vector,
the paper's BERT-Sim baseline (Eq. 2); or the mean over `[CLS] left GAP right [SEP]`, the pooling sentence
embedders were trained with. The pooling's prompt (e5: `query: `) comes right after [CLS]."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from quoter.encoders.batching import encode_rows, in_length_calls
from quoter.encoders.configs import ENCODE_BATCH, TRAINING_CALL_OVERHEAD, ContextEncoderConfig
from quoter.encoders.frozen_layers import FrozenBottom, bottom_states, top_states
from quoter.encoders.limits import segment_inputs, usable_length
from quoter.encoders.pooling import GAP_TEXT, GapMarker, PoolingMode
from quoter.encoders.saved_encoder import FORMAT_KEYS, load_encoder_model, read_encoder_settings, save_encoder
from quoter.errors import QuoterError
from quoter.ranking import Query
from quoter.saved_config import from_json, to_json

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

SAVED_FORMAT = "quoter-context-encoder"
SAVED_VERSION = 1
CONFIG_FILE = "context_encoder.json"


@dataclass(frozen=True)
class ContextRow:
    """One context ready for the model: token ids, segment ids and the position whose state is its vector."""

    input_ids: list[int]
    token_type_ids: list[int]
    position: int


@dataclass(frozen=True)
class ContextBatch:
    """Padded tensors for a batch of contexts; with `states`, the contexts' hidden states after the encoder's
    frozen bottom (kept from an earlier pass), which the encoder then starts from."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    positions: torch.Tensor
    states: torch.Tensor | None = None

    def select(self, rows: torch.Tensor, width: int) -> ContextBatch:
        """The batch's rows `rows`, cut to their first `width` tokens."""
        states = None if self.states is None else self.states[rows, :width]
        cut = (tensor[rows, :width] for tensor in (self.input_ids, self.attention_mask, self.token_type_ids))
        return ContextBatch(*cut, self.positions[rows], states)


def fit_context(left: Sequence[int], right: Sequence[int], budget: int) -> tuple[list[int], list[int]]:
    """Trim the far end of each side (the start of the left, the end of the right) to fit `budget` tokens.

    Each side gets half the budget; a side that needs less leaves the rest to the other. The tokens next to
    the gap are always the ones kept, so the gap marker between them can never be cut away."""
    if len(left) + len(right) <= budget:
        return list(left), list(right)
    keep_left = min(len(left), max(budget // 2, budget - len(right)))
    keep_right = min(len(right), budget - keep_left)
    return list(left[len(left) - keep_left :]), list(right[:keep_right])


class ContextEncoder(FrozenBottom):
    """Encodes query contexts into vectors with a pretrained encoder and its fast tokenizer."""

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, config: ContextEncoderConfig
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        needed = {"cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id, "pad": tokenizer.pad_token_id}
        if config.uses_mask_token():
            needed["mask"] = tokenizer.mask_token_id
        missing = [name for name, token_id in needed.items() if token_id is None]
        if missing:
            raise QuoterError(f"the model's tokenizer has no {', '.join(missing)} token; it cannot encode contexts")
        self.max_length = usable_length(config.max_length, model, tokenizer)
        # Models pretrained with two segments (BERT) mark the right context as the second one in BERT-Sim.
        self._two_segments = getattr(model.config, "type_vocab_size", 1) > 1
        # Tokenized without its trailing space: sentencepiece would make that space a token of its own, which
        # the prompt written before a text never has.
        self._prompt = self._ids(config.pooling.prompt.rstrip())
        self._gap = self._gap_ids()
        # Tokens every context takes besides its text: [CLS], prompt, what stands in the gap, [SEP].
        self._budget = self.max_length - 2 - len(self._prompt) - len(self._gap)
        if self._budget < 1:
            raise QuoterError(
                f"max_length {self.max_length} leaves no room for a context after the prompt "
                f"'{config.pooling.prompt}' and the gap marker"
            )

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def _gap_ids(self) -> list[int]:
        if self.config.uses_mask_token():
            return [self.tokenizer.mask_token_id]
        if self.config.pooling.mode is PoolingMode.CLS:
            return [self.tokenizer.sep_token_id]
        return self._ids(GAP_TEXT) if self.config.gap is GapMarker.TEXT else []

    def rows(self, queries: Sequence[Query]) -> list[ContextRow]:
        """Tokenize and truncate contexts into model inputs."""
        lefts = self.tokenizer([query.left for query in queries], add_special_tokens=False)["input_ids"]
        rights = self.tokenizer([query.right for query in queries], add_special_tokens=False)["input_ids"]
        return [self._row(*fit_context(left, right, self._budget)) for left, right in zip(lefts, rights)]

    def _row(self, left: list[int], right: list[int]) -> ContextRow:
        t = self.tokenizer
        before = [t.cls_token_id, *self._prompt, *left]
        ids = [*before, *self._gap, *right, t.sep_token_id]
        if self.config.pooling.mode is PoolingMode.CLS:
            second = 1 if self._two_segments else 0
            return ContextRow(ids, [0] * (len(before) + 1) + [second] * (len(right) + 1), 0)
        # The position is read by [MASK] pooling only.
        return ContextRow(ids, [0] * len(ids), len(before))

    def collate(self, rows: Sequence[ContextRow], device: torch.device | str | None = None) -> ContextBatch:
        """Pad rows into tensors on `device` (None: the model's)."""
        width = max(len(row.input_ids) for row in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        types = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, : len(row.input_ids)] = torch.tensor(row.input_ids)
            types[index, : len(row.input_ids)] = torch.tensor(row.token_type_ids)
            mask[index, : len(row.input_ids)] = 1
        positions = torch.tensor([row.position for row in rows], dtype=torch.long)
        device = self.model.device if device is None else device
        return ContextBatch(ids.to(device), mask.to(device), types.to(device), positions.to(device))

    def prepare(self, queries: Sequence[Query]) -> ContextBatch:
        """Model inputs for a batch of contexts."""
        return self.collate(self.rows(queries))

    def forward(self, batch: ContextBatch) -> torch.Tensor:
        """Context vectors (batch, hidden), pooled from the final hidden states as the config says.

        Training on a CPU, the batch runs in calls of similar length: a training batch is drawn at random and
        padded to its longest context, while encoding (in eval mode) already batches by length. A GPU keeps one
        call: padding costs it little next to more kernel launches and reading the lengths back."""
        if not self.training or batch.input_ids.device.type != "cpu":
            return self._padded_forward(batch)
        return in_length_calls(
            batch.attention_mask.sum(1),
            lambda rows, width: self._padded_forward(batch.select(rows, width)),
            TRAINING_CALL_OVERHEAD,
        )

    def _padded_forward(self, batch: ContextBatch) -> torch.Tensor:
        if batch.states is not None:
            hidden = top_states(self.model, batch.states, batch.attention_mask, self.frozen_layers)
        else:
            hidden = self.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                **segment_inputs(self.model, batch.token_type_ids),
            ).last_hidden_state
        return self.config.pooling.pool(hidden, batch.attention_mask, batch.positions)

    def bottom_states(self, batch: ContextBatch) -> torch.Tensor:
        """The contexts' hidden states after the frozen bottom (freeze_bottom), (batch, tokens, hidden)."""
        ids, mask, types = batch.input_ids, batch.attention_mask, batch.token_type_ids
        return bottom_states(self.model, ids, mask, types, self.frozen_layers)

    def encode(
        self, queries: Sequence[Query], batch_size: int = ENCODE_BATCH, progress_label: str | None = None
    ) -> np.ndarray:
        """Context vectors as a float32 array (len(queries), hidden), computed without gradients; with a
        `progress_label`, a progress bar counts them on a terminal."""
        rows = self.rows(queries) if queries else []
        dim = self.model.config.hidden_size
        return encode_rows(self, rows, lambda row: len(row.input_ids), self.collate, batch_size, dim, progress_label)

    def save(self, folder: Path) -> None:
        """Save model, tokenizer and settings; replaces `folder` atomically."""
        settings = {"format": SAVED_FORMAT, "version": SAVED_VERSION, **to_json(self.config)}
        save_encoder(Path(folder), self.model, self.tokenizer, CONFIG_FILE, settings)

    @classmethod
    def load(cls, folder: Path) -> ContextEncoder:
        """Load an encoder written by `save`."""
        required = ("max_length", "pooling", "gap")
        settings = read_encoder_settings(folder, CONFIG_FILE, "context encoder", SAVED_FORMAT, SAVED_VERSION, required)
        config = from_json(ContextEncoderConfig, settings, Path(folder) / CONFIG_FILE, beside=FORMAT_KEYS)
        model, tokenizer = load_encoder_model(folder)
        return cls(model, tokenizer, config)
