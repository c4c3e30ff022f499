"""Quoter's server against the service a user would write instead, side by side in one run (a benchmark, not a test).

    python -m benchmarks.versus [--quotes 1000 100000] [--clients 1 8 32] [--requests 300] [--seconds 10]
                                [--quoter-option=--threads=2 ...] [--reference-threads 1]

For each quote-set size N it saves an English bundle of the default model (offline:minilm-en) read with its
native pooling, as the default server reads it, over N random unit quote vectors (benchmarks.serve_latency),
then starts both services on loopback on those quotes: Quoter's `serve.py` with its default settings (the
context runtime it picks is printed) and the reference service of benchmarks.reference_service (plain
transformers float32, mean pooling, faiss flat, FastAPI). This process drives both with aiohttp clients
(benchmarks.server_load):

- latency: one client alternates single requests between the two services, so that load from elsewhere on a
  shared machine falls on both alike, and which of the two goes first swaps every round, so that neither
  always runs right after the other; after WARMUP_ROUNDS uncounted rounds, p50/p95/p99 of each and the
  ratio of the medians (reference / Quoter);
- throughput: for each client count c, c concurrent clients send requests to each service for --seconds in
  two halves, in the order A B B A (A alternates from one client count to the next), so that a drift of
  the machine's load falls on both alike; requests/s of each and their ratio (Quoter / reference), with
  the latencies under that load.

Server and clients share this machine's CPUs. The reference uses torch's and faiss's own thread counts (all
cores), as its author would; on a busy machine those threads wait on each other and its latency grows many
times, so `--reference-threads 1` gives it Quoter's default of half the cores on 2 CPUs for a conservative
comparison. Each start of Quoter's server on a new bundle exports the context encoder to ONNX (about half a
minute); the defaults run for about six minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from benchmarks.serve_latency import MODEL, free_port, start_and_wait, start_server, synthetic_bundle
from benchmarks.server_load import Clients, Outcomes, drive, for_seconds, ok, session_for, valid_requests, warm_up
from quoter.encoders.model_sources import native_pooling
from quoter.tables import markdown_table

SERVICES = ("quoter", "reference")
WARMUP_ROUNDS = 20  # alternating rounds before the counted ones: first calls, caches, connection pools
HEADERS = ["quotes", "clients", "service", "requests", "p50 ms", "p95 ms", "p99 ms", "requests/s", "ratio"]


def percentiles(latencies: list[float]) -> list[str]:
    """p50, p95 and p99 in milliseconds, formatted."""
    return [f"{ms:.1f}" for ms in np.percentile(np.array(latencies) * 1000, [50, 95, 99])]


async def alternating_latencies(urls: dict[str, str], requests: int) -> dict[str, list[float]]:
    """One client sending `requests` single requests to each service in turn, after WARMUP_ROUNDS uncounted
    rounds, the first service of each round swapping; each one's latencies (s)."""
    latencies: dict[str, list[float]] = {name: [] for name in urls}
    sessions = {name: session_for(url, 1) for name, url in urls.items()}
    sends = {name: valid_requests() for name in urls}
    names = list(urls)
    try:
        for number in range(-WARMUP_ROUNDS, requests):
            for name in names if number % 2 == 0 else names[::-1]:
                started = time.perf_counter()
                response = await sends[name](sessions[name])
                if number >= 0:
                    latencies[name].append(time.perf_counter() - started)
                if response.status != 200:
                    raise RuntimeError(f"{name} answered {response.status}")
    finally:
        for session in sessions.values():
            await session.close()
    return latencies


def throughput(url: str, clients: int, seconds: float, outcomes: Outcomes) -> float:
    """`clients` concurrent clients sending single requests for `seconds`, their outcomes added to `outcomes`;
    the wall time (s)."""
    started = time.perf_counter()
    asyncio.run(drive(url, [Clients(clients, valid_requests(), outcomes, for_seconds(seconds))]))
    wall = time.perf_counter() - started
    if outcomes.failed:
        raise RuntimeError(f"{outcomes.failed} requests to {url} failed")
    return wall


def compare(urls: dict[str, str], quotes: int, args: argparse.Namespace, emit: Callable[[list], None]) -> None:
    """Emit the rows of one quote-set size: alternating latency at one client, then throughput per client count."""
    for url in urls.values():
        asyncio.run(warm_up(url))
    latencies = asyncio.run(alternating_latencies(urls, args.requests))
    medians = {name: float(np.median(values)) for name, values in latencies.items()}
    for name, values in latencies.items():
        ratio = f"{medians['reference'] / medians['quoter']:.2f}x faster" if name == "quoter" else ""
        emit([f"{quotes:,}", "1 (alternating)", name, len(values), *percentiles(values), "", ratio])
    for number, clients in enumerate(args.clients):
        first, second = SERVICES if number % 2 == 0 else SERVICES[::-1]
        outcomes = {name: Outcomes(ok) for name in SERVICES}
        walls = dict.fromkeys(SERVICES, 0.0)
        for name in (first, second, second, first):
            walls[name] += throughput(urls[name], clients, args.seconds / 2, outcomes[name])
        results = {name: (outcomes[name], len(outcomes[name].latencies) / walls[name]) for name in SERVICES}
        for name in SERVICES:
            outcomes_of, rate = results[name]
            ratio = f"{rate / results['reference'][1]:.2f}x the requests/s" if name == "quoter" else ""
            row = [f"{quotes:,}", clients, name, len(outcomes_of.latencies), *percentiles(outcomes_of.latencies)]
            emit(row + [f"{rate:.1f}", ratio])


def runtime_of(url: str) -> str:
    """The context runtime Quoter's server says it uses."""
    return httpx.get(f"{url}/health", timeout=10).json()["bundles"][0]["runtime"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quotes", type=int, nargs="+", default=[1_000, 100_000], help="quote-set sizes")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients")
    parser.add_argument("--requests", type=int, default=300, help="alternating requests to each service")
    parser.add_argument("--seconds", type=float, default=10, help="how long each throughput run sends requests")
    parser.add_argument("--quoter-option", action="append", default=[], help="an option for serve.py (repeatable)")
    parser.add_argument(
        "--reference-threads", type=int, help="the reference's torch and faiss threads (default: theirs, all cores)"
    )
    args = parser.parse_args()
    rows: list[list] = []
    runtimes = []

    def emit(row: list) -> None:
        rows.append(row)
        print(markdown_table(HEADERS, [row]).splitlines()[-1], flush=True)

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="quoter-versus-") as folder:
        for quotes in args.quotes:
            bundle = synthetic_bundle(Path(folder) / f"bundle-{quotes}", quotes, pooling=native_pooling(MODEL))
            ports = {name: free_port() for name in SERVICES}
            reference_command = [sys.executable, "-m", "benchmarks.reference_service", "--bundle", str(bundle)]
            if args.reference_threads is not None:
                reference_command += ["--threads", str(args.reference_threads)]
            servers = [
                start_server(bundle, ports["quoter"], int8=False, options=args.quoter_option),
                start_and_wait(reference_command + ["--port", str(ports["reference"])], ports["reference"]),
            ]
            try:
                urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
                runtimes.append(f"{quotes:,} quotes: {runtime_of(urls['quoter'])}")
                compare(urls, quotes, args, emit)
            finally:
                for server in servers:
                    server.terminate()
                    server.wait(timeout=30)
    load_after = os.getloadavg()
    settings = " ".join(args.quoter_option) or "(default settings)"
    print(f"\nQuoter: serve.py {settings}; context runtime {', '.join(runtimes)}")
    threads = f"threads: {args.reference_threads}" if args.reference_threads else "torch's and faiss's own threads"
    print(
        f"reference: benchmarks.reference_service ({MODEL}, transformers float32, mean pooling, faiss flat; {threads})"
    )
    runs = f"{args.requests} alternating requests each after {WARMUP_ROUNDS} uncounted rounds"
    runs += f"; {args.seconds:g} s per throughput run, in halves A B B A"
    print(f"random unit quote vectors; k = 10; {runs}")
    load = f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    print(f"server and clients on this machine ({os.cpu_count()} CPUs); {load}\n")
    print(markdown_table(HEADERS, rows))


if __name__ == "__main__":
    main()
