"""A Quoter model as one self-contained folder: both encoders, the quote set and its frozen vectors.

Training writes a bundle; evaluation, batch recommendation and the server load one. Loading reads nothing
outside the folder, so a bundle can be copied anywhere and made read-only. Nothing in it is pickled: the
encoders are transformers folders (safetensors), the quotes JSON lines, the vectors a safetensors file, and
the settings JSON.

    bundle.json                   format, version, language, fusion and lexical (hybrid bundles), info, and
                                  written_with: the versions of Quoter and the libraries that wrote it
    context_encoder/              ContextEncoder.save: model, tokenizer, length, pooling and gap settings
    quote_encoder/                QuoteEncoder.save: model, tokenizer, sememe embeddings and the sememe
                                  lexicon they were trained with (with its origin), pooling and gloss settings
    quotes.jsonl                  {"quote", "source"[, "gloss"]}, one per line; a quote's id is its line number
    quote_vectors.safetensors     {"vectors": float32 (quotes, hidden)}, encoded by the quote encoder
    known_contexts.jsonl          (hybrid bundles) {"left", "right", "quote_id"}: the training contexts CRM reads
    known_context_vectors.safetensors  (hybrid bundles) {"vectors": float32 (contexts, hidden)}: the known
                                  contexts encoded by the context encoder, which the knn signal reads

A hybrid bundle (trained with fusion on) also records in bundle.json the fusion of its dense scores with BM25,
CRM and knn that was fitted on the valid split, and the BM25 settings of BM25 and CRM; its ranker
(hybrid_bundle.py) then ranks by that fused score. Every part's settings are written and read as their
dataclass's fields (saved_config.py). Version 1 bundles named their lexicon by a path outside the folder;
`quoter bundle upgrade` converts them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from quoter.atomic_files import check_output_folder, write_folder_atomic
from quoter.baselines.lexical_index import LexicalConfig
from quoter.datasets import Sample
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import InputError
from quoter.fusion import Fusion
from quoter.json_files import read_json_file
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.quote_set import QuoteSet
from quoter.saved_config import from_json, to_json
from quoter.text_lines import json_object

BUNDLE_FORMAT = "quoter-bundle"
BUNDLE_VERSION = 2
# Version 1 read its sememe lexicon from a path outside the folder.
UPGRADABLE_VERSION = 1
SETTINGS_FILE = "bundle.json"
CONTEXT_FOLDER = "context_encoder"
QUOTE_FOLDER = "quote_encoder"
QUOTES_FILE = "quotes.jsonl"
VECTORS_FILE = "quote_vectors.safetensors"
KNOWN_CONTEXTS_FILE = "known_contexts.jsonl"
KNOWN_VECTORS_FILE = "known_context_vectors.safetensors"
# The packages whose versions bundle.json records (not read back: a bundle of this version loads whatever
# versions wrote it).
WRITTEN_WITH = ("quoter", "torch", "transformers", "safetensors", "numpy")
# Files that can run code when they are loaded: a bundle holding one is refused.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")


@dataclass
class Bundle:
    """Everything needed to rank a quote set for a context, in one language."""

    language: Language
    context_encoder: ContextEncoder
    quote_encoder: QuoteEncoder
    quotes: list[QuoteRecord]
    quote_vectors: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)  # how it was made: model, settings, metrics
    fusion: Fusion | None = None  # hybrid bundles: how dense, BM25, CRM and knn scores are fused
    known_contexts: list[Sample] = field(default_factory=list)  # hybrid bundles: CRM's and knn's training contexts
    known_vectors: np.ndarray | None = None  # hybrid bundles: the known contexts' vectors, for knn
    lexical: LexicalConfig = LexicalConfig()  # hybrid bundles: the BM25 settings of BM25 and CRM

    def __post_init__(self) -> None:
        if self.quote_vectors.shape[0] != len(self.quotes):
            raise ValueError(f"{len(self.quotes)} quotes but {self.quote_vectors.shape[0]} quote vectors")

    def quote_set(self) -> QuoteSet:
        """The bundle's own quotes (ids = line numbers) with their frozen vectors."""
        ids = list(range(len(self.quotes)))
        return QuoteSet(ids, list(self.quotes), self.quote_vectors, self.quote_encoder.identity)

    def save(self, folder: str | Path) -> None:
        """Write the bundle; `folder` is replaced only once the new bundle is complete."""

        def build(target: Path) -> None:
            self.context_encoder.save(target / CONTEXT_FOLDER)
            self.quote_encoder.save(target / QUOTE_FOLDER)
            lines = (json.dumps(q.to_json(), ensure_ascii=False) for q in self.quotes)
            (target / QUOTES_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            if self.fusion is not None:
                contexts = ({"left": s.left, "right": s.right, "quote_id": s.quote_id} for s in self.known_contexts)
                text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in contexts)
                (target / KNOWN_CONTEXTS_FILE).write_text(text, encoding="utf-8")
            if self.fusion is not None and self.known_vectors is not None:
                known = torch.from_numpy(np.ascontiguousarray(self.known_vectors, dtype=np.float32))
                save_file({"vectors": known}, str(target / KNOWN_VECTORS_FILE))
            vectors = torch.from_numpy(np.ascontiguousarray(self.quote_vectors, dtype=np.float32))
            save_file({"vectors": vectors}, str(target / VECTORS_FILE))
            settings = {
                "format": BUNDLE_FORMAT,
                "version": BUNDLE_VERSION,
                "language": self.language.value,
                "fusion": None if self.fusion is None else to_json(self.fusion),
                "lexical": None if self.fusion is None else to_json(self.lexical),
                "info": self.info,
                "written_with": library_versions(),
            }
            (target / SETTINGS_FILE).write_text(json.dumps(settings, ensure_ascii=False, indent=2) + "\n", "utf-8")

        write_folder_atomic(Path(folder), build)

    @classmethod
    def load(cls, folder: str | Path) -> Bundle:
        """Load a bundle written by `save`, reading nothing outside `folder`; its quote encoder keeps its
        lexicon, so new quotes get their sememes."""
        folder = check_bundle_folder(folder)
        settings = read_bundle_settings(folder / SETTINGS_FILE)
        context_encoder = ContextEncoder.load(folder / CONTEXT_FOLDER)
        return cls.with_encoders(folder, settings, context_encoder, QuoteEncoder.load(folder / QUOTE_FOLDER))

    @classmethod
    def with_encoders(
        cls, folder: Path, settings: dict[str, Any], context_encoder: ContextEncoder, quote_encoder: QuoteEncoder
    ) -> Bundle:
        """The bundle in `folder` (its bundle.json `settings` already read) with these encoders: its quotes,
        their vectors, and a hybrid bundle's fusion, BM25 settings, known contexts and their vectors are read from
        the folder."""
        quotes = read_quote_records(folder / QUOTES_FILE)
        path = folder / SETTINGS_FILE
        fusion = None if settings.get("fusion") is None else from_json(Fusion, settings["fusion"], path, "fusion")
        # Bundles saved before their BM25 settings were kept ranked with the defaults.
        saved_lexical = settings.get("lexical")
        lexical = LexicalConfig() if saved_lexical is None else from_json(LexicalConfig, saved_lexical, path, "lexical")
        known_contexts = [] if fusion is None else read_known_contexts(folder / KNOWN_CONTEXTS_FILE, len(quotes))
        return cls(
            language=Language(settings["language"]),
            context_encoder=context_encoder,
            quote_encoder=quote_encoder,
            quotes=quotes,
            quote_vectors=load_file(str(folder / VECTORS_FILE))["vectors"].numpy(),
            info=settings.get("info", {}),
            fusion=fusion,
            known_contexts=known_contexts,
            known_vectors=None if fusion is None else read_known_vectors(folder, fusion, len(known_contexts)),
            lexical=lexical,
        )


def check_bundle_output(folder: Path, option: str) -> None:
    """Refuse, before any work, a folder given by `option` that a bundle written there would replace while it holds
    anything but an earlier bundle (see atomic_files.check_output_folder)."""
    check_output_folder(folder, option, "an earlier bundle", _files_besides_a_bundle)


def _files_besides_a_bundle(folder: Path) -> list[str]:
    """What `folder` holds, unless it is a bundle (its bundle.json says so), which a new bundle replaces."""
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable or not JSON: no bundle
        settings = None
    if isinstance(settings, dict) and settings.get("format") == BUNDLE_FORMAT:
        return []
    return sorted(path.name for path in folder.iterdir())


def library_versions() -> dict[str, str | None]:
    """The versions of Quoter and the libraries that wrote the bundle, for whoever reads it later (None: not
    installed as a package, e.g. Quoter run from a source folder)."""
    versions: dict[str, str | None] = {}
    for package in WRITTEN_WITH:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def read_quote_records(path: Path) -> list[QuoteRecord]:
    """Read a bundle's quotes.jsonl; a bad line is reported with its number."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("not a Quoter bundle (quotes file missing)", path=path) from None
    for number, line in enumerate(lines, start=1):
        item = json_object(line, path, number, '{"quote": ..., "source": ...}')
        try:
            records.append(QuoteRecord.from_json(item))
        except (KeyError, TypeError):
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
        item = json_object(line, path, number, '{"left": ..., "right": ..., "quote_id": ...}')
        try:
            sample = Sample(str(item["left"]), int(item["quote_id"]), str(item["right"]), number)
        except (KeyError, TypeError, ValueError):
            raise InputError('expected {"left": ..., "right": ..., "quote_id": ...}', path=path, line=number) from None
        if not 0 <= sample.quote_id < n_quotes:
            raise InputError(f"quote_id {sample.quote_id} is not a quote of the bundle", path=path, line=number)
        samples.append(sample)
    return samples


def read_known_vectors(folder: Path, fusion: Fusion, n_contexts: int) -> np.ndarray | None:
    """A hybrid bundle's known_context_vectors.safetensors; None where it has none (made before the knn
    signal, whose fusion then gives knn no weight)."""
    path = folder / KNOWN_VECTORS_FILE
    if not path.is_file():
        if fusion.weights.get("knn"):
            raise InputError("the fusion weighs the knn signal, and its known context vectors are missing", path=path)
        return None
    vectors = load_file(str(path))["vectors"].numpy()
    if len(vectors) != n_contexts:
        raise InputError(f"{len(vectors)} vectors for {n_contexts} known contexts", path=path)
    return vectors


def check_bundle_folder(folder: str | Path) -> Path:
    """`folder` as a Path, refused unless it is a folder without pickled files: loading one can run any code
    it carries (transformers would load a pytorch_model.bin where model.safetensors is missing)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            f"not a Quoter bundle: {'a file' if folder.exists() else 'nothing'} there, not a folder", path=folder
        )
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in PICKLE_SUFFIXES:
            raise InputError("a bundle holds no pickled files (they can run code when loaded): refused", path=path)
    return folder


def read_bundle_settings(path: Path, version: int = BUNDLE_VERSION) -> dict[str, Any]:
    """bundle.json of a bundle of `version`; a version 1 bundle is refused with how to convert it."""
    settings = read_json_file(path, "not a Quoter bundle (bundle.json missing)")
    if not isinstance(settings, dict) or settings.get("format") != BUNDLE_FORMAT:
        raise InputError(f"not a Quoter bundle (format is not '{BUNDLE_FORMAT}')", path=path)
    found = settings.get("version")
    if found == UPGRADABLE_VERSION and version != UPGRADABLE_VERSION:
        raise InputError(
            "a version 1 bundle, which reads its sememe lexicon from outside its folder; convert it with "
            f"`quoter bundle upgrade {path.parent} NEW_FOLDER [--lexicon FILE]`",
            path=path,
        )
    if found != version:
        raise InputError(f"bundle version {found} is not supported", path=path)
    if "language" not in settings:
        raise InputError("missing setting 'language'", path=path)
    return settings
