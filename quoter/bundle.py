"""A Quoter model as one folder: both encoders, the quote set and its frozen vectors.

Training writes a bundle; evaluation, batch recommendation and the server load one. Nothing in it is
pickled: the encoders are transformers folders (safetensors), the quotes JSON lines, the vectors a
safetensors file, and the settings JSON.

    bundle.json                   format, version, language, context settings (length, pooling, gap marker),
                                  lexicon reference, info
    context_encoder/              the context encoder's model and tokenizer
    quote_encoder/                the quote encoder (QuoteEncoder.save: model, tokenizer, sememe embeddings,
                                  pooling and gloss settings)
    quotes.jsonl                  {"quote", "source"[, "gloss"]}, one per line; a quote's id is its line number
    quote_vectors.safetensors     {"vectors": float32 (quotes, hidden)}, encoded by the quote encoder
    known_contexts.jsonl          (hybrid bundles) {"left", "right", "quote_id"}: the training contexts CRM reads

A hybrid bundle (trained with fusion on) also records in bundle.json the fusion of its dense scores with BM25
and CRM that was fitted on the valid split; its ranker then ranks by that fused score.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from quoter.atomic_files import write_folder_atomic
from quoter.baselines.lexical_signals import lexical_signals
from quoter.datasets import Sample
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.model_sources import default_model, load_pretrained, native_pooling
from quoter.encoders.pooling import GapMarker, Pooling, PoolingChoice, choose_pooling
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.encoders.ranker import EncoderRanker
from quoter.errors import InputError
from quoter.fusion import Fusion, HybridRanker, Signal
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.ranking import Ranker
from quoter.sememes.alignment import SememeAnnotator
from quoter.sememes.sources import LexiconConfig, load_lexicon

BUNDLE_FORMAT = "quoter-bundle"
BUNDLE_VERSION = 1
SETTINGS_FILE = "bundle.json"
CONTEXT_FOLDER = "context_encoder"
QUOTE_FOLDER = "quote_encoder"
QUOTES_FILE = "quotes.jsonl"
VECTORS_FILE = "quote_vectors.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
KNOWN_CONTEXTS_FILE = "known_contexts.jsonl"


@dataclass
class Bundle:
    """Everything needed to rank a quote set for a context, in one language."""

    language: Language
    context_encoder: ContextEncoder
    quote_encoder: QuoteEncoder
    quotes: list[QuoteRecord]
    quote_vectors: np.ndarray
    lexicon: LexiconConfig | None = None
    info: dict[str, Any] = field(default_factory=dict)  # how it was made: model, settings, metrics
    fusion: Fusion | None = None  # hybrid bundles: how dense, BM25 and CRM scores are fused
    known_contexts: list[Sample] = field(default_factory=list)  # hybrid bundles: CRM's training contexts

    def __post_init__(self) -> None:
        if self.quote_vectors.shape[0] != len(self.quotes):
            raise ValueError(f"{len(self.quotes)} quotes but {self.quote_vectors.shape[0]} quote vectors")

    def ranker(self, batch_size: int = 32) -> Ranker:
        """A Ranker over the bundle's quote set with its frozen vectors, fused with the lexical signals when
        the bundle is hybrid."""
        return self.ranker_over(self.quotes, self.quote_vectors, batch_size)

    def ranker_over(self, records: Sequence[QuoteRecord], vectors: np.ndarray, batch_size: int = 32) -> Ranker:
        """The bundle's ranking over another quote set (its vectors encoded by this bundle): CRM keeps the
        known contexts of the quotes the set shares with the bundle."""
        dense = EncoderRanker(self.context_encoder, vectors, batch_size)
        if self.fusion is None:
            return dense
        id_of = {record.text: index for index, record in enumerate(records)}
        contexts = [
            replace(sample, quote_id=id_of[self.quotes[sample.quote_id].text])
            for sample in self.known_contexts
            if self.quotes[sample.quote_id].text in id_of
        ]
        signals = {"dense": Signal(dense), **lexical_signals(records, contexts, self.language)}
        return HybridRanker(signals, self.fusion)

    def save(self, folder: str | Path) -> None:
        """Write the bundle; `folder` is replaced only once the new bundle is complete."""

        def build(target: Path) -> None:
            self.context_encoder.model.save_pretrained(target / CONTEXT_FOLDER)
            self.context_encoder.tokenizer.save_pretrained(target / CONTEXT_FOLDER)
            self.quote_encoder.save(target / QUOTE_FOLDER)
            lines = (json.dumps(q.to_json(), ensure_ascii=False) for q in self.quotes)
            (target / QUOTES_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            if self.fusion is not None:
                contexts = ({"left": s.left, "right": s.right, "quote_id": s.quote_id} for s in self.known_contexts)
                text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in contexts)
                (target / KNOWN_CONTEXTS_FILE).write_text(text, encoding="utf-8")
            vectors = torch.from_numpy(np.ascontiguousarray(self.quote_vectors, dtype=np.float32))
            save_file({"vectors": vectors}, str(target / VECTORS_FILE))
            settings = {
                "format": BUNDLE_FORMAT,
                "version": BUNDLE_VERSION,
                "language": self.language.value,
                "context_encoder": {
                    "max_length": self.context_encoder.config.max_length,
                    "pooling": self.context_encoder.config.pooling.to_json(),
                    "gap": self.context_encoder.config.gap.value,
                },
                "lexicon": None if self.lexicon is None else _lexicon_to_json(self.lexicon),
                "fusion": None if self.fusion is None else self.fusion.to_json(),
                "info": self.info,
            }
            (target / SETTINGS_FILE).write_text(json.dumps(settings, ensure_ascii=False, indent=2) + "\n", "utf-8")

        write_folder_atomic(Path(folder), build)

    @classmethod
    def load(cls, folder: str | Path) -> Bundle:
        """Load a bundle written by `save`; its lexicon is loaded too, so new quotes get their sememes."""
        folder = Path(folder)
        if not folder.is_dir():
            raise InputError(
                f"not a Quoter bundle: {'a file' if folder.exists() else 'nothing'} there, not a folder", path=folder
            )
        _refuse_pickles(folder)
        settings = _read_settings(folder / SETTINGS_FILE)
        language = Language(settings["language"])
        context_settings = settings["context_encoder"]
        # Older bundles name only the pooling mode, and always had the mask token in the gap.
        context_config = ContextEncoderConfig(
            max_length=int(context_settings["max_length"]),
            pooling=Pooling.from_json(context_settings["pooling"]),
            gap=GapMarker(context_settings.get("gap", GapMarker.MASK.value)),
        )
        model, tokenizer = load_pretrained(str(folder / CONTEXT_FOLDER))
        lexicon = None if settings["lexicon"] is None else _lexicon_from_json(settings["lexicon"])
        annotator = None if lexicon is None else SememeAnnotator(load_lexicon(lexicon, language), language)
        quotes = read_quote_records(folder / QUOTES_FILE)
        fusion = None if settings.get("fusion") is None else Fusion.from_json(settings["fusion"])
        return cls(
            language=language,
            context_encoder=ContextEncoder(model, tokenizer, context_config),
            quote_encoder=QuoteEncoder.load(folder / QUOTE_FOLDER, annotator),
            quotes=quotes,
            quote_vectors=load_file(str(folder / VECTORS_FILE))["vectors"].numpy(),
            lexicon=lexicon,
            info=settings.get("info", {}),
            fusion=fusion,
            known_contexts=[] if fusion is None else read_known_contexts(folder / KNOWN_CONTEXTS_FILE, len(quotes)),
        )

    @classmethod
    def zero_shot(
        cls,
        language: Language,
        quotes: Sequence[QuoteRecord],
        model: str | None = None,
        pooling: PoolingChoice = PoolingChoice.NATIVE,
        gloss: bool = False,
        gap: GapMarker | None = None,
        batch_size: int = 32,
    ) -> Bundle:
        """An untrained bundle: one pretrained model (the language's default unless named) for both encoders,
        read with its native pooling unless another is chosen (`gap` overrides its gap marker), without
        sememes; quote vectors encoded now (with the quotes' glosses when `gloss`)."""
        name = model or default_model(language)
        pretrained, tokenizer = load_pretrained(name)
        chosen = choose_pooling(pooling, native_pooling(name))
        context_config = ContextEncoderConfig(pooling=chosen.context, gap=gap or chosen.gap)
        context = ContextEncoder(pretrained, tokenizer, context_config)
        quote_encoder = QuoteEncoder(pretrained, tokenizer, QuoteEncoderConfig(pooling=chosen.quote, gloss=gloss))
        vectors = quote_encoder.encode_records(quotes, batch_size)
        info = {"model": name, "trained": False}
        return cls(language, context, quote_encoder, list(quotes), vectors, info=info)


def read_quote_records(path: Path) -> list[QuoteRecord]:
    """Read a bundle's quotes.jsonl; a bad line is reported with its number."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("not a Quoter bundle (quotes file missing)", path=path) from None
    for number, line in enumerate(lines, start=1):
        try:
            records.append(QuoteRecord.from_json(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError('expected {"quote": ..., "source": ...}', path=path, line=number) from None
    return records


def read_known_contexts(path: Path, n_quotes: int) -> list[Sample]:
    """Read a hybrid bundle's known_contexts.jsonl; a bad line is reported with its number."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("a hybrid bundle needs its known contexts, and the file is missing", path=path) from None
    samples = []
    for number, line in enumerate(lines, start=1):
        try:
            item = json.loads(line)
            sample = Sample(str(item["left"]), int(item["quote_id"]), str(item["right"]), number)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise InputError('expected {"left": ..., "right": ..., "quote_id": ...}', path=path, line=number) from None
        if not 0 <= sample.quote_id < n_quotes:
            raise InputError(f"quote_id {sample.quote_id} is not a quote of the bundle", path=path, line=number)
        samples.append(sample)
    return samples


def _refuse_pickles(folder: Path) -> None:
    """A bundle holds no pickled file: loading one can run any code it carries (transformers would load a
    pytorch_model.bin where model.safetensors is missing)."""
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in PICKLE_SUFFIXES:
            raise InputError("a bundle holds no pickled files (they can run code when loaded): refused", path=path)


def _lexicon_to_json(lexicon: LexiconConfig) -> dict[str, str | None]:
    return {key: None if value is None else str(value) for key, value in asdict(lexicon).items()}


def _lexicon_from_json(data: dict[str, str | None]) -> LexiconConfig:
    paths = {key: None if data.get(key) is None else Path(str(data[key])) for key in ("cedict", "lemmas")}
    return LexiconConfig(source=str(data["source"]), **paths)


def _read_settings(path: Path) -> dict[str, Any]:
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("not a Quoter bundle (bundle.json missing)", path=path) from None
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON: {error.msg}", path=path, line=error.lineno) from None
    if not isinstance(settings, dict) or settings.get("format") != BUNDLE_FORMAT:
        raise InputError(f"not a Quoter bundle (format is not '{BUNDLE_FORMAT}')", path=path)
    if settings.get("version") != BUNDLE_VERSION:
        raise InputError(f"bundle version {settings.get('version')} is not supported", path=path)
    for key in ("language", "context_encoder", "lexicon"):
        if key not in settings:
            raise InputError(f"missing setting '{key}'", path=path)
    return settings
