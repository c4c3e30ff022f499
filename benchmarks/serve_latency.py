"""Latency and throughput of the HTTP server under concurrent clients (a benchmark, not a test).

    python -m benchmarks.serve_latency [--sizes 1000 10000 100000] [--clients 1 8 32] [--requests 200]

For each quote-set size N it saves an English bundle whose context encoder is the real offline model
(offline:minilm-en) and whose N quote vectors are random unit vectors: the cost of searching N quotes
does not depend on the vectors' values, and encoding 100k real quotes would take far longer than the
benchmark. It then starts `serve.py` on loopback, with and without --int8, and drives POST /recommend
from this process with 1, 8 and 32 concurrent clients (each sends its next request once the last one
is answered), and prints p50/p95/p99 latency and throughput per (N, int8, clients). The clients share
the machine's CPU with the server, as a local demo does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np

from quoter.bundle import Bundle, QuoteRecord
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.model_sources import load_pretrained
from quoter.encoders.pooling import PAPER_POOLING, EncoderPooling
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.languages import Language
from quoter.tables import markdown_table

REPO = Path(__file__).resolve().parent.parent
MODEL = "offline:minilm-en"
WARMUP_REQUESTS = 5
STARTUP_TIMEOUT_S = 300
CONTEXTS = [
    ("When the going gets tough, remember that", "and keep walking."),
    ("She looked at the empty room and whispered", ""),
    ("My grandfather always told me that", "which is why I save a little every month."),
    ("The committee's decision surprised everyone; as the saying goes,", "so we should not judge too early."),
    ("He never gave up, because he believed", "and in the end he was right."),
    ("In the middle of the long winter I learned", ""),
    ("They say", "but I have found the opposite to be true in my own life and in the lives of friends."),
    ("After years of travelling across the world and meeting so many strangers, I finally understood", "."),
]


def synthetic_bundle(folder: Path, quotes: int, seed: int = 0, pooling: EncoderPooling = PAPER_POOLING) -> Path:
    """Save a bundle with the real English model, read with `pooling`, and `quotes` random unit quote vectors."""
    model, tokenizer = load_pretrained(MODEL)
    vectors = np.random.default_rng(seed).standard_normal((quotes, model.config.hidden_size)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = [QuoteRecord(f"synthetic quote {i}", "benchmark") for i in range(quotes)]
    bundle = Bundle(
        Language.EN,
        ContextEncoder(model, tokenizer, ContextEncoderConfig(pooling=pooling.context, gap=pooling.gap)),
        QuoteEncoder(model, tokenizer, QuoteEncoderConfig(pooling=pooling.quote)),
        records,
        vectors,
        info={"model": MODEL, "synthetic_vectors": True},
    )
    bundle.save(folder)
    return folder


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(bundle: Path, port: int, int8: bool, options: Sequence[str] = ()) -> subprocess.Popen:
    """Run serve.py on the bundle in a subprocess, with more command-line `options`, and wait until it answers."""
    command = [sys.executable, str(REPO / "serve.py"), "--bundle", f"en={bundle}", "--port", str(port), *options]
    return start_and_wait(command + (["--int8"] if int8 else []), port)


def start_and_wait(command: list[str], port: int) -> subprocess.Popen:
    """Run a server command in a subprocess and wait until its /health answers on `port`."""
    server = subprocess.Popen(command, cwd=REPO, env={**os.environ})
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"the server did not answer within {STARTUP_TIMEOUT_S} s")


async def drive(url: str, clients: int, requests: int, k: int) -> tuple[list[float], float]:
    """Send `requests` requests from `clients` concurrent clients; return each latency (s) and the wall time."""
    latencies: list[float] = []
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def one_client() -> None:
            for number in counter:
                left, right = CONTEXTS[number % len(CONTEXTS)]
                started = time.perf_counter()
                response = await client.post("/recommend", json={"left": left, "right": right, "k": k})
                latencies.append(time.perf_counter() - started)
                response.raise_for_status()

        for number in range(WARMUP_REQUESTS):
            left, right = CONTEXTS[number % len(CONTEXTS)]
            (await client.post("/recommend", json={"left": left, "right": right, "k": k})).raise_for_status()
        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        return latencies, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="quote-set sizes")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients")
    parser.add_argument("--requests", type=int, default=200, help="requests per (size, int8, clients)")
    parser.add_argument("--k", type=int, default=10, help="quotes per response")
    parser.add_argument("--no-int8", action="store_true", help="skip the --int8 runs")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="quoter-serve-bench-") as folder:
        for size in args.sizes:
            bundle = synthetic_bundle(Path(folder) / f"bundle-{size}", size)
            for int8 in [False] if args.no_int8 else [False, True]:
                port = free_port()
                server = start_server(bundle, port, int8)
                try:
                    for clients in args.clients:
                        latencies, wall = asyncio.run(drive(f"http://127.0.0.1:{port}", clients, args.requests, args.k))
                        p50, p95, p99 = np.percentile(np.array(latencies) * 1000, [50, 95, 99])
                        rows.append(
                            [f"{size:,}", "yes" if int8 else "no", clients, len(latencies)]
                            + [f"{p50:.1f}", f"{p95:.1f}", f"{p99:.1f}", f"{len(latencies) / wall:.1f}"]
                        )
                        print(markdown_table(HEADERS, rows[-1:]).splitlines()[-1], flush=True)
                finally:
                    server.terminate()
                    server.wait(timeout=30)
    print(f"\nquote vectors are random unit vectors (search cost does not depend on their values); k = {args.k}")
    print(f"context encoder {MODEL}, server and clients on this machine ({os.cpu_count()} CPUs)\n")
    print(markdown_table(HEADERS, rows))


HEADERS = ["quotes", "int8", "clients", "requests", "p50 ms", "p95 ms", "p99 ms", "requests/s"]

if __name__ == "__main__":
    main()
