"""Which runtime encodes contexts: torch (float32), ONNX Runtime (float32) or ONNX Runtime with int8 products;
by default, on a CPU, the fastest whose measured loss of MRR is at most MAX_MRR_LOSS and whose context vectors
do not depend on the other contexts of a call (MAX_BATCH_DEVIATION).

The ONNX graphs are exported once per context encoder and cached, beside the bundle when its folder can be
written and in $QUOTER_CACHE otherwise, under a hash of everything its vectors depend on (weights, settings,
tokenizer), of the check set and of the ONNX Runtime version, so a cached graph is never stale. At export each
ONNX runtime is measured against torch float32 on a check set and the result is saved with the graphs: the
mean cosine of the context vectors, the MRR of ranking the check set's quotes (encoded by the bundle's quote
encoder), and how far a context's vector moves between being encoded alone and beside contexts of other
lengths. Bundles do not keep their validation contexts, so the check set is fixed per language (CheckSet).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import xxhash

from quoter.atomic_files import build_folder_once
from quoter.datasets import load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.encoders.backend.runtime_config import MAX_BATCH_DEVIATION, MAX_MRR_LOSS, ContextRuntime
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.fingerprint import encoder_digest
from quoter.encoders.model_sources import cache_dir
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.encoders.ranker import ContextVectors
from quoter.errors import QuoterError
from quoter.languages import CHINESE, Language
from quoter.metrics import rank_metrics, ranks_from_scores
from quoter.ranking import Query

if TYPE_CHECKING:
    from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder

# On a CPU, fastest first (python -m benchmarks.versus); torch is the fallback.
FASTEST_FIRST = (ContextRuntime.ONNX_INT8, ContextRuntime.ONNX)
GRAPH_FILES = {ContextRuntime.ONNX: "context.onnx", ContextRuntime.ONNX_INT8: "context-int8.onnx"}
QUALITY_FILE = "quality.json"
CACHE_FOLDER = "onnx"  # in the bundle folder or in $QUOTER_CACHE
CACHE_FORMAT = 2  # part of the key: raised when the export changes (2: int8 activations per token)
CHECK_BANK_QUOTES = 100  # the Chinese check set: this many quotes of each Chinese bank, in its order
MIXED_CALL = 8  # contexts per call when checking that a vector does not depend on its neighbours


class EncoderPair(Protocol):
    """What the choice reads of a model (a Bundle is one): its language, context encoder and quote encoder."""

    language: Language
    context_encoder: ContextEncoder
    quote_encoder: QuoteEncoder


@dataclass(frozen=True)
class CheckSet:
    """Contexts whose gold quote is known: `gold[i]` indexes `quotes`."""

    name: str
    queries: list[Query]
    gold: list[int]
    quotes: list[str]


def check_set(language: Language) -> CheckSet:
    """English: every context of the built-in example set (126 hand-written contexts for 27 public-domain
    proverbs) and every quote of the built-in bank found from its gloss (569), all ranked against the
    quotes of both. The example set alone was too small to decide a loss of 0.005: int8's MRR on it moved
    by +0.007 with a standard error of 0.011, and one gold quote falling from rank 1 to 2 costs 0.008 of it;
    with the glosses the standard error is about 0.003. Chinese (either language): the first
    CHECK_BANK_QUOTES quotes of each Chinese bank, each to be found from its gloss, a plain-language
    paraphrase of it, in the model's own domain. One set for both, since they share a model: its graphs
    are exported and checked once, not twice, which took about a minute of the first start."""
    from quoter.quote_bank import load_quote_bank

    if language is Language.EN:
        dataset = load_dataset(EXAMPLE_DATA)
        quotes = list(dataset.quotes)
        numbers = {quote: number for number, quote in enumerate(quotes)}
        queries = [Query(sample.left, sample.right) for sample in dataset.samples]
        gold = [sample.quote_id for sample in dataset.samples]
        for record in load_quote_bank(language):
            if record.text not in numbers:
                numbers[record.text] = len(quotes)
                quotes.append(record.text)
            queries.append(Query(record.gloss, ""))
            gold.append(numbers[record.text])
        return CheckSet("example-set+en-bank-glosses", queries, gold, quotes)
    records = [record for chinese in CHINESE for record in load_quote_bank(chinese)[:CHECK_BANK_QUOTES]]
    queries = [Query(record.gloss, "") for record in records]
    return CheckSet("chinese-bank-glosses", queries, list(range(len(records))), [r.text for r in records])


@dataclass(frozen=True)
class RuntimeQuality:
    """An ONNX runtime against torch float32 on a check set: mean cosine of the context vectors, MRR, and the
    batch deviation: the largest change of a context's vector, relative to its largest component, between
    being encoded alone and in one call beside contexts of very different lengths."""

    check_set: str
    mean_cosine: float
    mrr: float
    float32_mrr: float
    batch_deviation: float

    @property
    def mrr_loss(self) -> float:
        """How much lower the MRR is than float32's (negative: higher)."""
        return self.float32_mrr - self.mrr

    def acceptable(self) -> bool:
        """Whether `auto` may run it: MRR at most MAX_MRR_LOSS below float32's, and each context's vector the
        same alone or batched (within MAX_BATCH_DEVIATION)."""
        return self.mrr_loss <= MAX_MRR_LOSS and self.batch_deviation <= MAX_BATCH_DEVIATION


@dataclass(frozen=True)
class ChosenRuntime:
    """The runtime that encodes contexts, its encoder, and its recorded quality (None for torch)."""

    name: str
    encoder: ContextVectors
    quality: RuntimeQuality | None = None

    def describe(self) -> str:
        """One line for logs: the runtime and, for ONNX, its measured cost."""
        if self.quality is None:
            return self.name
        q = self.quality
        measured = f"MRR {q.mrr:.4f} vs {q.float32_mrr:.4f} float32 on the {q.check_set}, cosine {q.mean_cosine:.4f}"
        return f"{self.name} ({measured}, alone vs batched {q.batch_deviation:.0e})"


def choose_runtime(bundle: EncoderPair, runtime: ContextRuntime, folder: Path | None = None) -> ChosenRuntime:
    """The context runtime for `bundle`: the one asked for, or with AUTO the fastest acceptable one. ONNX
    graphs are exported (and measured) on first use; `folder`: the bundle's folder, where they are cached
    when it can be written."""
    encoder = bundle.context_encoder
    on_cpu = encoder.model.device.type == "cpu"
    if runtime is ContextRuntime.TORCH or (runtime is ContextRuntime.AUTO and not on_cpu):
        return ChosenRuntime(ContextRuntime.TORCH.value, encoder)
    if not on_cpu:
        raise QuoterError(f"the {runtime.value} runtime runs on the CPU; the model is on {encoder.model.device}")
    from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder

    graphs = exported_graphs(bundle, folder)
    qualities = read_qualities(graphs)
    wanted = [runtime] if runtime is not ContextRuntime.AUTO else FASTEST_FIRST
    for candidate in wanted:
        if runtime is candidate or qualities[candidate].acceptable():
            onnx = OnnxContextEncoder(encoder, graphs / GRAPH_FILES[candidate])
            return ChosenRuntime(candidate.value, onnx, qualities[candidate])
    return ChosenRuntime(ContextRuntime.TORCH.value, encoder)


def exported_graphs(bundle: EncoderPair, folder: Path | None) -> Path:
    """The cache folder holding the bundle's context encoder as ONNX graphs and their measured quality,
    exported now if it is not there yet."""
    check = check_set(bundle.language)
    key = content_key(bundle.context_encoder, check.name)
    writable = folder is not None and os.access(folder, os.W_OK)
    root = (folder if writable else cache_dir()) / CACHE_FOLDER
    return build_folder_once(root / key, lambda target: _export_and_measure(bundle, check, target))


def content_key(encoder: ContextEncoder, check_name: str) -> str:
    """A hash of what the context vectors depend on (encoder_digest), of the check set and of the ONNX Runtime
    that exports and measures the graphs."""
    import onnxruntime  # its version, whichever build of it is installed (the one that runs the graphs)

    digest = xxhash.xxh3_128(f"{CACHE_FORMAT} {check_name} onnxruntime {onnxruntime.__version__}".encode())
    return encoder_digest(encoder, digest).hexdigest()


def _export_and_measure(bundle: EncoderPair, check: CheckSet, target: Path) -> None:
    from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder
    from quoter.encoders.backend.onnx_export import export_onnx, quantize_onnx_int8

    encoder = bundle.context_encoder
    export_onnx(encoder, target / GRAPH_FILES[ContextRuntime.ONNX])
    quantize_onnx_int8(target / GRAPH_FILES[ContextRuntime.ONNX], target / GRAPH_FILES[ContextRuntime.ONNX_INT8])
    quotes = bundle.quote_encoder.encode(check.quotes)
    reference = encoder.encode(check.queries)
    qualities = {}
    for runtime, graph in GRAPH_FILES.items():
        onnx = OnnxContextEncoder(encoder, target / graph)
        alone = onnx.encode(check.queries, batch_size=1)
        deviation = batch_deviation(alone, mixed_calls(onnx, check.queries))
        qualities[runtime.value] = asdict(measure_quality(check, quotes, reference, alone, deviation))
    (target / QUALITY_FILE).write_text(json.dumps(qualities, indent=2) + "\n", encoding="utf-8")


def mixed_calls(encoder: OnnxContextEncoder, queries: Sequence[Query]) -> np.ndarray:
    """The contexts' vectors from calls of MIXED_CALL contexts of very different lengths (shortest beside
    longest, by characters), each call padded to its longest context."""
    by_length = sorted(range(len(queries)), key=lambda index: len(queries[index].left) + len(queries[index].right))
    order = [by_length[i // 2] if i % 2 == 0 else by_length[-1 - i // 2] for i in range(len(by_length))]
    calls = [order[start : start + MIXED_CALL] for start in range(0, len(order), MIXED_CALL)]
    vectors = np.concatenate([encoder.encode_together([queries[index] for index in call]) for call in calls])
    result = np.empty_like(vectors)
    result[order] = vectors
    return result


def batch_deviation(alone: np.ndarray, batched: np.ndarray) -> float:
    """The largest change of a vector between `alone` and `batched` (the same contexts encoded alone and in
    calls with others), relative to the vector's largest component."""
    largest = np.abs(alone).max(axis=1).clip(min=1e-12)
    return float((np.abs(batched - alone).max(axis=1) / largest).max())


def measure_quality(
    check: CheckSet, quotes: np.ndarray, reference: np.ndarray, vectors: np.ndarray, deviation: float
) -> RuntimeQuality:
    """How close `vectors` are to the float32 `reference` vectors of the check set's contexts; `deviation`:
    their batch deviation (batch_deviation)."""
    cosines = (reference * vectors).sum(axis=1) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(vectors, axis=1)
    ).clip(min=1e-12)
    float32_mrr = rank_metrics(ranks_from_scores(reference @ quotes.T, check.gold))["mrr"]
    mrr = rank_metrics(ranks_from_scores(vectors @ quotes.T, check.gold))["mrr"]
    return RuntimeQuality(check.name, float(cosines.mean()), mrr, float32_mrr, deviation)


def read_qualities(graphs: Path) -> dict[ContextRuntime, RuntimeQuality]:
    """The quality recorded at export for each ONNX runtime."""
    saved = json.loads((graphs / QUALITY_FILE).read_text(encoding="utf-8"))
    return {ContextRuntime(name): RuntimeQuality(**values) for name, values in saved.items()}
