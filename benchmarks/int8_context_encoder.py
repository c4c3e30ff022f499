"""The ONNX context runtimes side by side on the default models: speed, ranking quality, batch independence
(a benchmark, not a test).

    python -m benchmarks.int8_context_encoder [--language en] [--language zh] [--threads N] [--rounds R]

For each language's default offline model (en: all-MiniLM-L6-v2, zh: multilingual-e5-small), read as the
built-in server reads it, the context encoder is exported to ONNX and run as:
  - onnx: float32;
  - onnx-int8 per call: int8 weights, activations quantized with one scale over each call (ONNX Runtime's
    dynamic quantization, the former onnx-int8): fast, but a context's vector follows its neighbours;
  - the same graph given one context per call: independent again, without batching;
  - onnx-int8: int8 weights, activations quantized with one scale per token (what onnx-int8 is now).
All of them take turns on every measurement (so that load from other processes falls on each alike): the
median time of encoding one context, and contexts per second when 8 or 16 contexts are encoded together (as
the server's micro-batches are, cut into calls that pad little), each also as a ratio to float32 ONNX.
Quality is measured on the language's check set as the runtime choice measures it (context_runtime.py): MRR
against torch float32 (the same quotes, encoded by torch), mean cosine to torch's vectors, and the batch
deviation (the largest change of a vector between alone and beside contexts of very different lengths).
Times include tokenization. On a shared machine quote the ratios, not the times.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from quoter.default_bundles import DEFAULT_GLOSS
from quoter.encoders.backend.context_runtime import batch_deviation, check_set, measure_quality, mixed_calls
from quoter.encoders.backend.onnx_context_encoder import OnnxContextEncoder
from quoter.encoders.backend.onnx_export import export_onnx, quantize_onnx_int8
from quoter.encoders.model_sources import default_model
from quoter.languages import Language
from quoter.ranking import Query
from quoter.tables import markdown_table
from quoter.zero_shot_bundle import zero_shot_bundle

BATCHES = (8, 16)
SINGLE_CONTEXTS = 120  # contexts timed one at a time, per round


@dataclass(frozen=True)
class Runtime:
    """An ONNX graph of the context encoder, given one context per call or as many as `encode` puts in one."""

    name: str
    encoder: OnnxContextEncoder
    one_per_call: bool = False

    def encode(self, queries: Sequence[Query], batch_size: int) -> np.ndarray:
        """The contexts' vectors, as this runtime is run."""
        return self.encoder.encode(queries, batch_size=1 if self.one_per_call else batch_size)


def per_call_int8(source: Path, target: Path) -> None:
    """The former onnx-int8 graph: ONNX Runtime's dynamic quantization, one activation scale per call."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # its suggestion to preprocess the graph first
    try:
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(previous)


def seconds(runtime: Runtime, queries: Sequence[Query], batch_size: int) -> float:
    """Wall seconds to encode the queries."""
    started = time.perf_counter()
    runtime.encode(queries, batch_size)
    return time.perf_counter() - started


def interleaved_speeds(runtimes: Sequence[Runtime], queries: Sequence[Query], rounds: int) -> list[list[float]]:
    """Per runtime: the median seconds to encode one context, then contexts per second for each of BATCHES.
    The runtimes take turns on every measurement."""
    for runtime in runtimes:  # warm-up: first calls allocate
        runtime.encode(queries[:16], 16)
    single: list[list[float]] = [[] for _ in runtimes]
    batched: list[dict[int, list[float]]] = [{size: [] for size in BATCHES} for _ in runtimes]
    for _ in range(rounds):
        for query in queries[:SINGLE_CONTEXTS]:
            for times, runtime in zip(single, runtimes):
                times.append(seconds(runtime, [query], 1))
        for size in BATCHES:
            for start in range(0, len(queries) - size + 1, size):
                batch = queries[start : start + size]
                for rates, runtime in zip(batched, runtimes):
                    rates[size].append(size / seconds(runtime, batch, size))
    return [
        [statistics.median(times), *(statistics.median(rates[size]) for size in BATCHES)]
        for times, rates in zip(single, batched)
    ]


def compare_language(language: Language, rounds: int, folder: Path) -> list[list[str]]:
    """Table rows, one per runtime, for the language's default model on its check set."""
    model = default_model(language)
    bundle = zero_shot_bundle(language, [], model=model, gloss=DEFAULT_GLOSS)
    encoder = bundle.context_encoder
    export_onnx(encoder, folder / "context.onnx")
    per_call_int8(folder / "context.onnx", folder / "per-call.onnx")
    quantize_onnx_int8(folder / "context.onnx", folder / "per-token.onnx")
    runtimes = [
        Runtime("onnx (float32)", OnnxContextEncoder(encoder, folder / "context.onnx")),
        Runtime("onnx-int8 per call (before)", OnnxContextEncoder(encoder, folder / "per-call.onnx")),
        Runtime("  same, one context per call", OnnxContextEncoder(encoder, folder / "per-call.onnx"), True),
        Runtime("onnx-int8 per token (now)", OnnxContextEncoder(encoder, folder / "per-token.onnx")),
    ]
    check = check_set(language)
    speeds = interleaved_speeds(runtimes, check.queries, rounds)
    quotes = bundle.quote_encoder.encode(check.quotes)
    reference = encoder.encode(check.queries)
    rows = []
    for runtime, speed in zip(runtimes, speeds):
        vectors = runtime.encode(check.queries, 64)
        together = vectors if runtime.one_per_call else mixed_calls(runtime.encoder, check.queries)
        deviation = batch_deviation(runtime.encoder.encode(check.queries, batch_size=1), together)
        quality = measure_quality(check, quotes, reference, vectors, deviation)
        ratios = [value / base for value, base in zip(speed, speeds[0])]
        rows.append(
            [
                f"{language.value}: {model}",
                runtime.name,
                f"{1000 * speed[0]:.2f} ({ratios[0]:.2f})",
                *(f"{rate:,.0f} ({ratio:.2f})" for rate, ratio in zip(speed[1:], ratios[1:])),
                f"{quality.mrr:.4f} ({-quality.mrr_loss:+.4f} vs {quality.float32_mrr:.4f})",
                f"{quality.mean_cosine:.4f}",
                f"{quality.batch_deviation:.0e}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--language", action="append", type=Language, help="en, zh or zh-classical (repeatable); default en and zh"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the interleaved timings (medians over all)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads per call (default: torch's choice)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rows = []
    for language in args.language or [Language.EN, Language.ZH]:
        with tempfile.TemporaryDirectory() as folder:
            rows += compare_language(language, args.rounds, Path(folder))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads per call; (ratio to onnx float32)")
    headers = [
        "model",
        "context runtime",
        "1 context, median ms",
        *(f"{size} together, contexts/s" for size in BATCHES),
        "check-set MRR (vs torch float32)",
        "cosine to torch",
        "batch deviation",
    ]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
