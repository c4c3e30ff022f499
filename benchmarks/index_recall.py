"""Exact against approximate (IVF) quote search: recall, speed and the error of the probabilities (a
benchmark, not a test).

    python -m benchmarks.index_recall [--sizes 100000 1000000] [--nlist 1024] [--nprobe 8 16 64]

For each quote-set size it builds both indexes over synthetic quote vectors and answers the same queries
one at a time, as a server does. Printed per index: recall@10 against exact search, the median and p95
milliseconds of a search (the top 10 and the softmax normaliser over all quotes), and how far the IVF
probabilities are from the exact ones (the normaliser's error in log space: 0.05 is 5%).

The vectors are unit vectors around 1,000 random centres, and the queries sit near quotes with a scale
that gives scores spread like those of a trained model: real quote vectors cluster by topic, which is
what IVF relies on; uniform random vectors would be its worst case and no model's output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import faiss
import numpy as np
import torch

from quoter.serving.live.index_config import IndexConfig, IndexKind
from quoter.serving.live.quote_index import QuoteIndex
from quoter.tables import markdown_table

DIM = 384  # the offline models' hidden size
CENTRES = 1000
QUERY_SCALE = 20.0
K = 10


def clustered_vectors(rows: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors scattered around random centres."""
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, CENTRES, rows)]
    vectors += 0.8 * rng.standard_normal((rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def timed_searches(index: QuoteIndex, queries: np.ndarray) -> tuple[list[float], np.ndarray, np.ndarray]:
    """Milliseconds of each single-query search, the ids found and the log normalisers."""
    times, found, normalizers = [], [], []
    for query in queries:
        started = time.perf_counter()
        _, ids, log_normalizer = index.search(query[None, :], K)
        times.append(1000 * (time.perf_counter() - started))
        found.append(ids[0])
        normalizers.append(log_normalizer[0])
    return times, np.array(found), np.array(normalizers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="quote-set sizes")
    parser.add_argument("--nlist", type=int, default=1024, help="IVF clusters")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 64], help="IVF clusters searched")
    parser.add_argument("--queries", type=int, default=200, help="queries per index")
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads (a server's default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    rows = []
    for size in args.sizes:
        rng = np.random.default_rng(size)
        vectors = clustered_vectors(size, rng)
        near = vectors[rng.integers(0, size, args.queries)] + 0.3 * rng.standard_normal((args.queries, DIM))
        queries = (QUERY_SCALE * near / np.linalg.norm(near, axis=1, keepdims=True)).astype(np.float32)
        ids = np.arange(size)
        exact_times, exact_ids, exact_norms = timed_searches(QuoteIndex(ids, vectors, IndexConfig(gpu=False)), queries)
        rows.append([f"{size:,}", "exact", "", "1.000", *_ms(exact_times), "0 (exact)"])
        started = time.perf_counter()
        ivf = QuoteIndex(ids, vectors, IndexConfig(kind=IndexKind.IVF, nlist=args.nlist, gpu=False))
        built = time.perf_counter() - started
        for nprobe in args.nprobe:
            ivf.set_nprobe(nprobe)
            times, found, norms = timed_searches(ivf, queries)
            recall = np.mean([len(set(a.tolist()) & set(b.tolist())) / K for a, b in zip(exact_ids, found)])
            error = np.abs(norms - exact_norms)
            rows.append(
                [f"{size:,}", "ivf", nprobe, f"{recall:.3f}", *_ms(times)]
                + [f"{statistics.median(error):.3f} / {np.percentile(error, 95):.3f}"]
            )
        print(f"{size:,} quotes: IVF with {args.nlist} clusters built (trained) in {built:.1f} s", flush=True)
    print(
        f"\n{args.queries} single-query searches per row, k = {K}, dim {DIM}, {args.threads} thread(s), "
        f"{os.cpu_count()} CPUs; synthetic clustered vectors (see the module's docstring)\n"
    )
    headers = ["quotes", "index", "nprobe", "recall@10", "median ms", "p95 ms", "normaliser error median / p95"]
    print(markdown_table(headers, rows))


def _ms(times: list[float]) -> list[str]:
    return [f"{statistics.median(times):.2f}", f"{np.percentile(times, 95):.2f}"]


if __name__ == "__main__":
    main()
