"""Float32 against dynamic int8 context encoding on the CPU: speed and ranking quality (a benchmark, not a test).

    python -m benchmarks.int8_context_encoder [--data FILE] [--split test] [--model offline:minilm-en]
                                              [--model offline:me5-small] [--threads N]

For each model, in one run: the median latency of encoding one context (batch size 1, as a server answers
a writer), contexts per second at batch size 32 (as evaluation encodes a split), and the MRR and Recall@10
of the zero-shot `encoder` method with the float and with the int8 context encoder. Both rank against the
same float quote vectors, so the difference is the context encoder's alone. Times include tokenization.
The default data is the built-in example set (quoter/examples/proverbs.tsv and its splits).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from quoter.datasets import QuoteDataset, load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.quantization import quantize_dynamic_int8
from quoter.encoders.ranker import EncoderRanker
from quoter.evaluation import evaluate
from quoter.methods import MethodOptions, build_ranker
from quoter.ranking import Query
from quoter.tables import markdown_table

THROUGHPUT_BATCH = 32
WARMUP = 3


def elapsed(encoder: ContextEncoder, queries: Sequence[Query], batch_size: int) -> float:
    """Seconds to encode the queries."""
    started = time.perf_counter()
    encoder.encode(queries, batch_size=batch_size)
    return time.perf_counter() - started


def interleaved_timings(
    encoders: Sequence[ContextEncoder], single: Sequence[Query], batched: Sequence[Query], repeats: int
) -> list[tuple[float, float]]:
    """(median seconds per context at batch size 1, median contexts per second at THROUGHPUT_BATCH) of each
    encoder. The encoders take turns on every measurement, so that load from other processes on a shared
    CPU falls on all of them alike rather than on whichever happened to run during it."""
    for encoder in encoders:
        for query in single[:WARMUP]:
            encoder.encode([query], batch_size=1)
        encoder.encode(batched[:THROUGHPUT_BATCH], batch_size=THROUGHPUT_BATCH)
    latencies: list[list[float]] = [[] for _ in encoders]
    for query in single:
        for times, encoder in zip(latencies, encoders):
            times.append(elapsed(encoder, [query], 1))
    rates: list[list[float]] = [[] for _ in encoders]
    for _ in range(repeats):
        for encoder_rates, encoder in zip(rates, encoders):
            encoder_rates.append(len(batched) / elapsed(encoder, batched, THROUGHPUT_BATCH))
    return [(statistics.median(times), statistics.median(r)) for times, r in zip(latencies, rates)]


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean cosine similarity of matching rows."""
    return float(np.mean((a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))


def compare_model(dataset: QuoteDataset, split: str, model: str, repeats: int, min_batch_contexts: int) -> list[list]:
    """Table rows (float, int8) for one model on one split of the dataset."""
    float_ranker = build_ranker("encoder", dataset, MethodOptions(model=model))
    if not isinstance(float_ranker, EncoderRanker):
        raise TypeError(f"the encoder method built a {type(float_ranker).__name__}, not an EncoderRanker")
    int8_encoder = quantize_dynamic_int8(float_ranker.context_encoder)
    int8_ranker = EncoderRanker(int8_encoder, float_ranker.quote_vectors, float_ranker.batch_size)
    samples = dataset.split(split)
    queries = [Query(sample.left, sample.right) for sample in samples]
    # A small split is cycled so that the batched timing covers enough full batches to be stable.
    cycles = -(-min_batch_contexts // len(queries))
    batch_queries = (queries * cycles)[: max(min_batch_contexts, len(queries))]
    rankers = {"float32": float_ranker, "int8": int8_ranker}
    timings = interleaved_timings([r.context_encoder for r in rankers.values()], queries, batch_queries, repeats)
    reports = {name: evaluate(ranker, dataset, split, f"encoder ({name})") for name, ranker in rankers.items()}
    rows = []
    for (name, report), (latency, rate) in zip(reports.items(), timings):
        metrics = report.overall
        rows.append(
            [
                model,
                name,
                f"{1000 * latency:.1f}",
                f"{rate:,.0f}",
                f"{metrics['mrr']:.4f}",
                f"{metrics['recall@10']:.4f}",
            ]
        )
    same_rank = float(np.mean(reports["float32"].ranks == reports["int8"].ranks))
    cosine = mean_cosine(float_ranker.context_encoder.encode(queries), int8_encoder.encode(queries))
    for row in rows:
        row += [f"{same_rank:.1%}", f"{cosine:.4f}"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=EXAMPLE_DATA, help="QuoteR file with sidecar splits")
    parser.add_argument("--split", default="test", help="split whose contexts are encoded and ranked")
    parser.add_argument("--model", action="append", help="model to compare (repeatable); default offline:minilm-en")
    parser.add_argument("--repeats", type=int, default=5, help="runs of the batched timing (median)")
    parser.add_argument("--batch-contexts", type=int, default=256, help="contexts per batched timing run")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    dataset = load_dataset(args.data)
    rows = []
    for model in args.model or ["offline:minilm-en"]:
        rows += compare_model(dataset, args.split, model, args.repeats, args.batch_contexts)
    contexts = len(dataset.split(args.split))
    print(
        f"{args.data} ({args.split}: {contexts} contexts, {len(dataset.quotes)} quotes); "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, quantized engine "
        f"{torch.backends.quantized.engine}"
    )
    headers = [
        "model",
        "context encoder",
        "batch 1 median ms",
        f"batch {THROUGHPUT_BATCH} contexts/s",
        "MRR",
        "Recall@10",
        "same rank",
        "cosine f32/int8",
    ]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
