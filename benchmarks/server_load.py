"""The HTTP server under load: latency, 503s and failures for valid and invalid requests (a benchmark, not a test).

    python -m benchmarks.server_load [--clients 1 16 64] [--seconds 10] [--quotes 1000]

It starts `serve.py` with its default limits on loopback, on an English bundle of the real offline model over
random quote vectors (benchmarks.serve_latency), and drives it from this process, each client sending its next
request once the last one is answered:

- for each client count c, c clients send valid POST /recommend requests for --seconds; then c clients send
  invalid ones (k = 0, NaN or "5", a lone surrogate, a text/plain body) beside c more sending valid ones;
- four clients send the largest batch (64 contexts of 2 x 2,000 characters) once each, while one client sends
  single short contexts, which should not wait for those batches, until the batches are answered;
- sixteen clients send batches of 64 short contexts for --seconds: more contexts than the queue takes (512),
  so some are refused with 503.

It prints p50/p95/p99 latency of the answered requests (503s included), the share of 503s, and how many failed
(a connection error, an unexpected status); after a 503 a client waits the Retry-After it was given. Server
and clients share this machine's CPUs; the clients use aiohttp, which needs a small part of the CPU that httpx
needs per request (with httpx, 64 clients measured mostly the client). With the defaults it runs for about
two minutes on 2 CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np

from benchmarks.serve_latency import CONTEXTS, MODEL, free_port, start_server, synthetic_bundle
from quoter.serving.http.schemas import MAX_BATCH, MAX_CONTEXT_CHARS
from quoter.tables import markdown_table

BIG_BATCH_CLIENTS = 4
LONG_TEXT = ("word " * MAX_CONTEXT_CHARS)[:MAX_CONTEXT_CHARS]
BIG_BATCH = {"requests": [{"left": LONG_TEXT, "right": LONG_TEXT, "lang": "en", "k": 10}] * MAX_BATCH}
OVERFLOW_CLIENTS = 16
SHORT_CONTEXTS = itertools.islice(itertools.cycle(CONTEXTS), MAX_BATCH)
SHORT_BATCH = {"requests": [{"left": left, "right": right, "k": 10} for left, right in SHORT_CONTEXTS]}
INVALID_BODIES = [
    (b'{"left": "a", "k": 0}', "application/json"),
    (b'{"left": "a", "k": NaN}', "application/json"),
    (b'{"left": "a", "k": "5"}', "application/json"),
    (b'{"left": "\\ud800"}', "application/json"),
    (b'{"left": "a"}', "text/plain"),
]
WARMUP_REQUESTS = 5
TIMEOUT_S = 600
HEADERS = ["requests", "clients", "answered", "p50 ms", "p95 ms", "p99 ms", "503 %", "failed"]

Send = Callable[[aiohttp.ClientSession], Awaitable[aiohttp.ClientResponse]]  # a request, read to its end


@dataclass
class Outcomes:
    """What the clients of one kind of request got: latency (s) of each answer, 503s, and failures."""

    expected: Callable[[int], bool]
    latencies: list[float] = field(default_factory=list)
    busy: int = 0
    failed: int = 0
    sent: int = 0

    def row(self, label: str, clients: int) -> list[object]:
        """A table row: percentiles in milliseconds, the share of 503s in percent."""
        answered = len(self.latencies)
        percentiles = np.percentile(np.array(self.latencies) * 1000, [50, 95, 99]) if answered else [np.nan] * 3
        busy = 100 * self.busy / max(1, answered)
        return [label, clients, answered, *(f"{ms:.0f}" for ms in percentiles), f"{busy:.1f}", self.failed]


@dataclass(frozen=True)
class Clients:
    """`count` clients that each send `send` requests, one after another, at least one and until `done()`."""

    count: int
    send: Send
    outcomes: Outcomes
    done: Callable[[], bool]


async def one_client(session: aiohttp.ClientSession, clients: Clients) -> None:
    """Send requests one after another as `clients` say, recording each outcome."""
    outcomes = clients.outcomes
    for number in itertools.count():
        if number and clients.done():
            return
        started = time.perf_counter()
        try:
            response = await clients.send(session)
        except (aiohttp.ClientError, asyncio.TimeoutError):
            outcomes.failed += 1
            continue
        finally:
            outcomes.sent += 1
        outcomes.latencies.append(time.perf_counter() - started)
        if response.status == 503:  # a client that behaves waits as long as it is told
            outcomes.busy += 1
            await asyncio.sleep(float(response.headers["Retry-After"]))
        elif not outcomes.expected(response.status):
            outcomes.failed += 1


async def post(session: aiohttp.ClientSession, path: str, **request: object) -> aiohttp.ClientResponse:
    """POST, and read the whole answer."""
    async with session.post(path, **request) as response:
        await response.read()
        return response


def valid_requests() -> Send:
    contexts = itertools.cycle(CONTEXTS)

    def send(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
        left, right = next(contexts)
        return post(session, "/recommend", json={"left": left, "right": right, "k": 10})

    return send


def invalid_requests() -> Send:
    bodies = itertools.cycle(INVALID_BODIES)

    def send(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
        body, content_type = next(bodies)
        return post(session, "/recommend", data=body, headers={"Content-Type": content_type})

    return send


def big_batches(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
    return post(session, "/recommend/batch", json=BIG_BATCH)


def short_batches(session: aiohttp.ClientSession) -> Awaitable[aiohttp.ClientResponse]:
    return post(session, "/recommend/batch", json=SHORT_BATCH)


def session_for(url: str, connections: int) -> aiohttp.ClientSession:
    """A client session of at most `connections` connections to the server."""
    connector = aiohttp.TCPConnector(limit=connections)
    return aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(total=TIMEOUT_S))


async def warm_up(url: str) -> None:
    """A few requests, so that the first measured ones do not pay for first calls."""
    send = valid_requests()
    async with session_for(url, 1) as session:
        for _ in range(WARMUP_REQUESTS):
            if (response := await send(session)).status != 200:
                raise RuntimeError(f"the server answered a warm-up request with {response.status}")


async def drive(url: str, groups: list[Clients]) -> None:
    """Run every group's clients at once."""
    async with session_for(url, sum(group.count for group in groups)) as session:
        await asyncio.gather(*(one_client(session, group) for group in groups for _ in range(group.count)))


def for_seconds(seconds: float) -> Callable[[], bool]:
    """Whether `seconds` have passed since this was called."""
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() > deadline


def ok(status: int) -> bool:
    return status == 200


def refused(status: int) -> bool:
    return 400 <= status < 500


def valid_and_invalid(url: str, clients: int, seconds: float) -> list[list[object]]:
    """Rows for `clients` clients sending valid requests, then as many sending invalid ones beside as many
    sending valid ones."""
    valid = Outcomes(ok)
    asyncio.run(drive(url, [Clients(clients, valid_requests(), valid, for_seconds(seconds))]))
    invalid, beside = Outcomes(refused), Outcomes(ok)
    done = for_seconds(seconds)
    asyncio.run(
        drive(
            url, [Clients(clients, invalid_requests(), invalid, done), Clients(clients, valid_requests(), beside, done)]
        )
    )
    return [valid.row("valid", clients), invalid.row("invalid, beside as many valid", clients)]


def single_beside_full_batches(url: str) -> list[list[object]]:
    """Rows for one client sending single contexts while others send one full batch each, and for the batches."""
    single, batches = Outcomes(ok), Outcomes(ok)

    def batches_answered() -> bool:
        return batches.sent == BIG_BATCH_CLIENTS

    groups = [
        Clients(BIG_BATCH_CLIENTS, big_batches, batches, done=lambda: True),
        Clients(1, valid_requests(), single, done=batches_answered),
    ]
    asyncio.run(drive(url, groups))
    return [
        single.row(f"single, beside {BIG_BATCH_CLIENTS} clients' full batches", 1),
        batches.row(f"full batch ({MAX_BATCH} x 2 x {MAX_CONTEXT_CHARS:,} characters)", BIG_BATCH_CLIENTS),
    ]


def over_the_queue(url: str, seconds: float) -> list[list[object]]:
    """The row for more clients sending batches of short contexts than the queue takes."""
    batches = Outcomes(ok)
    asyncio.run(drive(url, [Clients(OVERFLOW_CLIENTS, short_batches, batches, for_seconds(seconds))]))
    return [batches.row(f"batch of {MAX_BATCH} short contexts", OVERFLOW_CLIENTS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64], help="concurrent clients per kind")
    parser.add_argument("--seconds", type=float, default=10, help="how long each timed run sends requests")
    parser.add_argument("--quotes", type=int, default=1_000, help="quote-set size")
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="quoter-load-bench-") as folder:
        bundle = synthetic_bundle(Path(folder) / "bundle", args.quotes)
        port = free_port()
        server = start_server(bundle, port, int8=False)
        url = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(warm_up(url))
            for clients in args.clients:
                rows += valid_and_invalid(url, clients, args.seconds)
                print("\n".join(markdown_table(HEADERS, rows[-2:]).splitlines()[2:]), flush=True)
            rows += single_beside_full_batches(url)
            rows += over_the_queue(url, args.seconds)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"\nserve.py with its default limits, {args.quotes:,} random quote vectors, context encoder {MODEL}, k = 10;")
    print(f"server and clients on this machine ({os.cpu_count()} CPUs); {args.seconds:g} s of requests per timed run;")
    print(f"took {time.monotonic() - started:.0f} s in all\n")
    print(markdown_table(HEADERS, rows))


if __name__ == "__main__":
    main()
