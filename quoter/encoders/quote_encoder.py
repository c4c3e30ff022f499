"""The quote encoder: a pretrained encoder's [CLS] state (the paper) or mean state (sentence embedders), with a
proper attention mask, over the pooling's prompt, the quote and optionally its gloss behind the tokenizer's
separator token; sememes are added to the quote's input embeddings by the paper's Eq. 6.

For a word w split into tokens x1..xn, every token embedding becomes x_i + alpha * mean(sememe embeddings
of w), before position embeddings and LayerNorm (the model is fed `inputs_embeds`). Sememe embeddings are a
learned nn.Embedding, saved with the encoder as safetensors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from quoter.encoders.batching import encode_rows
from quoter.encoders.configs import ENCODE_BATCH, QuoteEncoderConfig
from quoter.encoders.frozen_layers import FrozenBottom
from quoter.encoders.limits import segment_inputs, usable_length
from quoter.encoders.saved_encoder import FORMAT_KEYS, load_encoder_model, read_encoder_settings, save_encoder
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.saved_config import from_json, to_json
from quoter.sememes.alignment import SememeAnnotator, TokenSememe, token_sememes
from quoter.sememes.saved_lexicon import load_saved_lexicon, save_lexicon

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

SAVED_FORMAT = "quoter-quote-encoder"
SAVED_VERSION = 2  # 2: the lexicon is saved inside the folder
CONFIG_FILE = "quote_encoder.json"
SEMEMES_FILE = "sememe_embeddings.safetensors"
LEXICON_FILE = "sememe_lexicon.json"
# What the settings hold beside the config's fields.
OWN_KEYS = ("sememe_names", "language", "identity")
# From this many quotes on, encoding takes long enough (tens of seconds for a base model on a CPU) to show a
# progress bar on a terminal.
PROGRESS_MIN_QUOTES = 3_000


@dataclass(frozen=True)
class QuoteRow:
    """One quote ready for the model: token ids and the sememe terms of its tokens."""

    input_ids: list[int]
    sememes: list[TokenSememe]


@dataclass(frozen=True)
class QuoteBatch:
    """Padded tensors for a batch of quotes; sememe terms are flat (row * width + position, sememe, weight)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    sememe_tokens: torch.Tensor
    sememe_ids: torch.Tensor
    sememe_weights: torch.Tensor


class QuoteEncoder(FrozenBottom):
    """Encodes quotes into vectors; with an annotator and sememe names, adds sememes by Eq. 6."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerFast,
        config: QuoteEncoderConfig,
        annotator: SememeAnnotator | None = None,
        sememe_names: Sequence[str] | None = None,
        identity: str | None = None,
    ) -> None:
        """`sememe_names` defaults to the annotator's lexicon's; when both are given they must agree, since
        each embedding row belongs to one named sememe. `identity` names what makes the vectors (a saved
        encoder's weights digest, or a pretrained model's name), so that vectors it made can be told apart
        from another encoder's; None until saved."""
        super().__init__()
        self.identity = identity
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.annotator = annotator
        self.max_length = usable_length(config.max_length, model, tokenizer)
        lexicon_names = tuple(annotator.lexicon.names) if annotator is not None else ()
        self.sememe_names = tuple(sememe_names) if sememe_names is not None else lexicon_names
        if annotator is not None and lexicon_names != self.sememe_names:
            raise QuoterError(
                f"the lexicon ({annotator.lexicon.description}) names {len(lexicon_names)} sememes, which differ "
                f"from the {len(self.sememe_names)} this quote encoder has embeddings for; use the same lexicon"
            )
        self.sememe_embeddings: nn.Embedding | None = None
        if self.sememe_names:
            self.sememe_embeddings = nn.Embedding(len(self.sememe_names), model.config.hidden_size)
            # Random initialisation, as in the paper; the scale of the model's own initialisation.
            nn.init.normal_(self.sememe_embeddings.weight, std=getattr(model.config, "initializer_range", 0.02))
            self.sememe_embeddings.to(model.device)

    def text(self, quote: str, description: str = "") -> str:
        """What the model reads for a quote: the prompt, the quote, and (when glosses are on) its description
        (`QuoteRecord.description`: gloss and source) after the separator token. Truncation cuts the end, so
        a long description never pushes the quote out."""
        text = self.config.pooling.prompt + quote
        if self.config.gloss and description.strip():
            text += f" {self.tokenizer.sep_token} {description.strip()}"
        return text

    def rows(self, records: Sequence[QuoteRecord]) -> list[QuoteRow]:
        """Tokenize quotes (with their descriptions when glosses are on; truncated to max_length) and align the
        quotes' words' sememes to tokens by offsets."""
        encoded = self.tokenizer(
            [self.text(record.text, record.description) for record in records],
            truncation=True,
            max_length=self.max_length,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        shift = len(self.config.pooling.prompt)
        rows = []
        for index, record in enumerate(records):
            terms: list[TokenSememe] = []
            if self._sememes_on():
                # Sememes belong to the quote's words: spans moved past the prompt, and the gloss after the
                # quote overlaps none of them.
                spans = [
                    replace(span, start=span.start + shift, end=span.end + shift)
                    for span in self.annotator.spans(record.text)
                ]
                terms = token_sememes(encoded["offset_mapping"][index], encoded["special_tokens_mask"][index], spans)
            rows.append(QuoteRow(encoded["input_ids"][index], terms))
        return rows

    def _sememes_on(self) -> bool:
        return self.annotator is not None and self.sememe_embeddings is not None and self.config.alpha != 0

    def collate(self, rows: Sequence[QuoteRow]) -> QuoteBatch:
        """Pad rows into tensors on the model's device."""
        width = max(len(row.input_ids) for row in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        tokens, sememes, weights = [], [], []
        for index, row in enumerate(rows):
            ids[index, : len(row.input_ids)] = torch.tensor(row.input_ids)
            mask[index, : len(row.input_ids)] = 1
            for term in row.sememes:
                tokens.append(index * width + term.token)
                sememes.append(term.sememe)
                weights.append(term.weight)
        device = self.model.device
        return QuoteBatch(
            ids.to(device),
            mask.to(device),
            torch.tensor(tokens, dtype=torch.long, device=device),
            torch.tensor(sememes, dtype=torch.long, device=device),
            torch.tensor(weights, dtype=torch.float32, device=device),
        )

    def prepare(self, quotes: Sequence[str]) -> QuoteBatch:
        """Model inputs for a batch of quotes."""
        return self.collate(self.rows([QuoteRecord(quote) for quote in quotes]))

    def input_embeddings(self, batch: QuoteBatch) -> torch.Tensor:
        """Token embeddings with alpha * (mean sememe embedding of the token's word) added (Eq. 6)."""
        embeddings = self.model.get_input_embeddings()(batch.input_ids)
        if self.sememe_embeddings is None or batch.sememe_ids.numel() == 0:
            return embeddings
        terms = batch.sememe_weights.unsqueeze(1).to(embeddings.dtype) * self.sememe_embeddings(batch.sememe_ids)
        added = torch.zeros_like(embeddings).view(-1, embeddings.shape[-1]).index_add(0, batch.sememe_tokens, terms)
        return embeddings + self.config.alpha * added.view_as(embeddings)

    def forward(self, batch: QuoteBatch) -> torch.Tensor:
        """Quote vectors (batch, hidden): the final hidden state of [CLS] or the mean of all, padding masked out."""
        segments = segment_inputs(self.model, torch.zeros_like(batch.input_ids))
        if batch.sememe_ids.numel() == 0:
            # No sememe reaches this batch: exactly the plain model.
            output = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **segments)
        else:
            output = self.model(
                inputs_embeds=self.input_embeddings(batch), attention_mask=batch.attention_mask, **segments
            )
        first = torch.zeros(len(batch.input_ids), dtype=torch.long, device=batch.input_ids.device)
        return self.config.pooling.pool(output.last_hidden_state, batch.attention_mask, first)

    def encode(self, quotes: Sequence[str], batch_size: int = ENCODE_BATCH) -> np.ndarray:
        """Quote vectors as a float32 array (len(quotes), hidden), computed without gradients."""
        return self.encode_records([QuoteRecord(quote) for quote in quotes], batch_size)

    def encode_records(self, records: Sequence[QuoteRecord], batch_size: int = ENCODE_BATCH) -> np.ndarray:
        """Vectors of quote records, each read with its gloss and source when glosses are on."""
        rows = self.rows(records) if records else []
        dim = self.model.config.hidden_size
        label = "encoding quotes" if len(records) >= PROGRESS_MIN_QUOTES else None
        return encode_rows(self, rows, lambda row: len(row.input_ids), self.collate, batch_size, dim, label)

    def weights_digest(self) -> str:
        """A hash of the settings and weights: equal for two encoders that give every quote the same vector."""
        digest = hashlib.sha256(json.dumps(self._settings(), sort_keys=True).encode("utf-8"))
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode("utf-8"))
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    def _settings(self) -> dict[str, Any]:
        return {
            "format": SAVED_FORMAT,
            "version": SAVED_VERSION,
            **to_json(self.config),
            "sememe_names": list(self.sememe_names),
            "language": None if self.annotator is None else self.annotator.language.value,
        }

    def save(self, folder: Path) -> None:
        """Save model, tokenizer, sememe embeddings (safetensors), the lexicon the sememes come from, and the
        settings with the encoder's identity (its weights' digest); replaces `folder` atomically."""
        self.identity = self.weights_digest()

        def write_sememes(target: Path) -> None:
            if self.sememe_embeddings is not None:
                weight = self.sememe_embeddings.weight.detach().cpu().contiguous()
                save_file({"weight": weight}, str(target / SEMEMES_FILE))
            if self.annotator is not None:
                save_lexicon(self.annotator.lexicon, target / LEXICON_FILE)

        settings = {**self._settings(), "identity": self.identity}
        save_encoder(Path(folder), self.model, self.tokenizer, CONFIG_FILE, settings, write_sememes)

    @classmethod
    def load(cls, folder: Path) -> QuoteEncoder:
        """Load an encoder written by `save`, with the lexicon saved beside it (nothing outside `folder` is
        read)."""
        folder = Path(folder)
        required = ("max_length", "alpha", "pooling", "gloss", *OWN_KEYS)
        settings = read_encoder_settings(folder, CONFIG_FILE, "quote encoder", SAVED_FORMAT, SAVED_VERSION, required)
        config = from_json(QuoteEncoderConfig, settings, folder / CONFIG_FILE, beside=(*FORMAT_KEYS, *OWN_KEYS))
        annotator = None
        if settings["language"] is not None:
            lexicon = load_saved_lexicon(folder / LEXICON_FILE)
            annotator = SememeAnnotator(lexicon, Language(settings["language"]))
        model, tokenizer = load_encoder_model(folder)
        encoder = cls(model, tokenizer, config, annotator, settings["sememe_names"], str(settings["identity"]))
        encoder.load_sememe_embeddings(folder / SEMEMES_FILE)
        return encoder

    def load_sememe_embeddings(self, path: Path) -> None:
        """Read the sememe embeddings `save` wrote (nothing to read for an encoder without sememes)."""
        if self.sememe_embeddings is None:
            return
        weight = load_file(str(path))["weight"]
        if weight.shape != self.sememe_embeddings.weight.shape:
            raise InputError(
                f"sememe embeddings have shape {tuple(weight.shape)}, expected "
                f"{tuple(self.sememe_embeddings.weight.shape)}",
                path=path,
            )
        with torch.no_grad():
            self.sememe_embeddings.weight.copy_(weight)
