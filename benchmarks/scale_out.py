"""Beyond one process, measured side by side in one run (a benchmark, not a test):

    python -m benchmarks.scale_out [--quotes 1000] [--clients 1 16] [--requests 300] [--contexts 2000]

Serving: requests/s and p50/p95 latency of POST /recommend against `serve.py` as it runs by default (one
uvicorn process) and on Ray Serve with 1 and 2 replicas (`--engine ray`), each replica with one encoder thread,
the live quote set in a PostgreSQL database (the replicas' shared store; a throwaway server is started in a
temporary folder unless --store names one). The bundle is English with the real offline model and --quotes
random quote vectors (benchmarks.serve_latency). Batch: contexts/s of `quoter batch` over --contexts contexts,
single-process and on Ray Data with 1 and 2 workers, each command timed whole (start, model loading, ranking,
writing), and whether the outputs are the same bytes. Clients, servers and workers share this machine's CPUs;
the table says how many there are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

from benchmarks.serve_latency import CONTEXTS, REPO, drive, free_port, start_and_wait, synthetic_bundle
from quoter.tables import markdown_table

SERVE_ENGINES = {"local (uvicorn)": [], "ray, 1 replica": ["--replicas", "1"], "ray, 2 replicas": ["--replicas", "2"]}
BATCH_ENGINES = {
    "single process": [],
    "ray, 1 worker": ["--engine", "ray", "--workers", "1"],
    "ray, 2 workers": ["--engine", "ray", "--workers", "2"],
}
K = 10


@contextmanager
def throwaway_store() -> Iterator[str]:
    """A PostgreSQL database on a server started for this run in a temporary folder, as the tests start one."""
    from tests.postgres_fixtures import running_postgres

    with running_postgres() as server:
        yield server.new_database()


def serve_row(bundle: Path, name: str, options: Sequence[str], store: str, clients: int, requests: int) -> list:
    """One row: the server started with `options`, driven by `clients` clients for `requests` requests."""
    port = free_port()
    ray = ["--engine", "ray", *options] if options else []
    command = [sys.executable, str(REPO / "serve.py"), "--bundle", f"en={bundle}", "--port", str(port)]
    server = start_and_wait([*command, "--threads", "1", "--store", store, *ray], port)
    try:
        latencies, elapsed = asyncio.run(drive(f"http://127.0.0.1:{port}", clients, requests, K))
    finally:
        server.terminate()
        server.wait(timeout=120)
    milliseconds = np.array(latencies) * 1000
    return [
        name,
        clients,
        f"{len(latencies) / elapsed:.1f}",
        f"{np.percentile(milliseconds, 50):.1f}",
        f"{np.percentile(milliseconds, 95):.1f}",
    ]


def batch_row(bundle: Path, name: str, options: Sequence[str], contexts: Path, folder: Path) -> tuple[list, bytes]:
    """One row: `quoter batch` with `options` over `contexts`, timed whole; and its output."""
    output = folder / f"{name.replace(' ', '-').replace(',', '')}.jsonl"
    command = [sys.executable, "-m", "quoter", "batch", "--bundle", str(bundle), "--input", str(contexts)]
    started = time.perf_counter()
    subprocess.run([*command, "--output", str(output), "--k", str(K), *options], cwd=REPO, check=True)
    elapsed = time.perf_counter() - started
    count = sum(1 for _ in contexts.open(encoding="utf-8"))
    return [name, f"{elapsed:.1f}", f"{count / elapsed:.0f}"], output.read_bytes()


def write_contexts(path: Path, count: int) -> Path:
    """`count` contexts as JSON lines, cycling through the benchmark contexts."""
    lines = (
        json.dumps({"left": CONTEXTS[i % len(CONTEXTS)][0], "right": CONTEXTS[i % len(CONTEXTS)][1], "id": i})
        for i in range(count)
    )
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quotes", type=int, default=1000, help="quotes in the served set")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16], help="concurrent clients")
    parser.add_argument("--requests", type=int, default=300, help="requests per measurement")
    parser.add_argument("--contexts", type=int, default=2000, help="contexts of the batch run")
    parser.add_argument("--store", help="a PostgreSQL URL for the replicas' quote set (default: a throwaway server)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; clients, servers and workers share them")
    given = nullcontext(args.store) if args.store else None
    with tempfile.TemporaryDirectory() as temporary, given or throwaway_store() as store:
        folder = Path(temporary)
        bundle = synthetic_bundle(folder / "bundle", args.quotes)
        rows = [
            serve_row(bundle, name, options, store, clients, args.requests)
            for name, options in SERVE_ENGINES.items()
            for clients in args.clients
        ]
        print(f"\nPOST /recommend, {args.quotes:,} quotes, k={K}\n")
        print(markdown_table(["server", "clients", "requests/s", "p50 ms", "p95 ms"], rows))
        contexts = write_contexts(folder / "contexts.jsonl", args.contexts)
        results = [batch_row(bundle, name, options, contexts, folder) for name, options in BATCH_ENGINES.items()]
        same = all(output == results[0][1] for _, output in results)
        print(f"\nquoter batch, {args.contexts:,} contexts, k={K}; outputs the same bytes: {same}\n")
        print(markdown_table(["engine", "seconds", "contexts/s"], [row for row, _ in results]))


if __name__ == "__main__":
    main()
