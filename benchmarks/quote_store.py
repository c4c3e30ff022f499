"""What adding a quote to a served quote set costs, and what a restart then costs (a benchmark, not a test).

    python -m benchmarks.quote_store [--sizes 1000 100000] [--dim 768] [--adds 200] [--folder DIR]

For each size N it saves nothing but a live set of N quotes with random unit vectors (the store and the
index do not look at the values), then adds `--adds` quotes one by one through LiveQuotes.add, each saved
(one fsynced line) before it returns, and prints the median and 95th percentile milliseconds per add; then
it reopens the set as a restarting server does (replaying the added quotes and compacting them into a
snapshot) and prints how long that took. Encoding is left out: a fixed random vector stands in for the
quote encoder, whose cost per quote does not depend on N. The folder should be on the disk a server would
use (`--folder`; default: the system's temporary folder), since the add cost is mostly its fsync.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from quoter.quote_record import QuoteRecord
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.live.live_quotes import LiveQuotes
from quoter.serving.live.quote_store import StoredQuotes
from quoter.tables import markdown_table


class RandomVectors:
    """Stands in for the quote encoder: the same random unit vector for every quote."""

    def __init__(self, dim: int) -> None:
        vector = np.random.default_rng(1).standard_normal((1, dim)).astype(np.float32)
        self.vector = vector / np.linalg.norm(vector)

    def encode_records(self, records: Sequence[QuoteRecord], batch_size: int = 32) -> np.ndarray:
        return np.repeat(self.vector, len(records), axis=0)


def bundle_quotes(size: int, dim: int) -> StoredQuotes:
    """`size` quotes with random unit vectors, numbered as a bundle numbers them."""
    vectors = np.random.default_rng(0).standard_normal((size, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return StoredQuotes({i: QuoteRecord(f"bundle quote {i}", "benchmark") for i in range(size)}, vectors, size)


def measure(size: int, dim: int, adds: int, folder: Path) -> list[str]:
    """One table row: N, median and p95 ms per add, and the seconds a restart takes after the adds."""
    encoder = RandomVectors(dim)
    quotes = bundle_quotes(size, dim)
    # The index config without a GPU: a GPU copy of the index is refreshed after every change.
    live = LiveQuotes.open(quotes, encoder, IndexConfig(gpu=False), folder)  # type: ignore[arg-type]
    times = []
    for i in range(adds):
        started = time.perf_counter()
        live.add(QuoteRecord(f"added quote {i}", "benchmark"))
        times.append((time.perf_counter() - started) * 1000)
    assert len(live) == size + adds
    del live  # the server stops
    started = time.perf_counter()
    restarted = LiveQuotes.open(quotes, encoder, IndexConfig(gpu=False), folder)  # type: ignore[arg-type]
    restart = time.perf_counter() - started
    assert len(restarted) == size + adds
    p95 = float(np.percentile(times, 95))
    return [f"{size:,}", str(dim), f"{statistics.median(times):.2f}", f"{p95:.2f}", f"{restart:.2f}"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000], help="quotes before the adds")
    parser.add_argument("--dim", type=int, default=768, help="vector size (768: a BERT-base bundle)")
    parser.add_argument("--adds", type=int, default=200, help="quotes added one by one per size")
    parser.add_argument("--folder", type=Path, default=None, help="where the sets are saved (a temporary folder)")
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(dir=args.folder) as folder:
            rows.append(measure(size, args.dim, args.adds, Path(folder)))
    header = ["quotes", "dim", "median ms per add", "p95 ms per add", f"restart after {args.adds} adds (s)"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
