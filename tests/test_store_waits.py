"""The shared quote store never makes a reader wait on the database, and tells a writer what became of its change:
a database whose processes hang (stopped) leaves health, recommendations and listings answering from memory while
changes answer 503 within a bounded time; a connection cut as COMMIT goes through is found out (made or not) or
answered "outcome unknown", and retrying it is safe; a removal routed to a process that has not caught up with the
add removes the quote. A real server: postgres_fixtures."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quoter.bundle import Bundle, QuoteRecord
from quoter.serving.http.app import STORE_RETRY_AFTER_S, AppConfig, create_app
from quoter.serving.live.live_quotes import (
    CHANGE_WAIT_S,
    LiveQuotes,
    OutcomeUnknownError,
    StoreUnavailableError,
)
from quoter.serving.live.postgres_store import STORE_WAIT_S, shared_quotes
from quoter.serving.recommender import Recommender
from tests.postgres_fixtures import PostgresServer
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle

# What a read may take while the database hangs: it answers from memory.
READ_S = 2.0
# A change waits for the one before it, then connects and runs its statements, each bounded by STORE_WAIT_S.
CHANGE_BOUND_S = CHANGE_WAIT_S + 3 * STORE_WAIT_S
FOLLOW_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Bundle:
    return tiny_bundle(tmp_path_factory.mktemp("bundle"))


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the server's backends and helpers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The command name, in parentheses, may hold spaces: the parent's pid is the second field after it.
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry.name))
    return found


@contextmanager
def hung(server: PostgresServer) -> Iterator[None]:
    """The server's processes stopped (SIGSTOP) for the block, as a database that hangs: its kernel still accepts
    connections and acknowledges packets, and nothing answers."""
    postmaster = int((server.folder / "data" / "postmaster.pid").read_text().split()[0])
    processes = [postmaster, *children(postmaster)]
    for pid in processes:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in processes:
            os.kill(pid, signal.SIGCONT)


def timed(call, *args, **kwargs):
    started = time.monotonic()
    result = call(*args, **kwargs)
    return result, time.monotonic() - started


def test_a_hung_database_stalls_no_read_and_changes_answer_503_in_bounded_time(
    postgres_server: PostgresServer, postgres_url, bundle
):
    recommender = Recommender(bundle, database=postgres_url)
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "added before"}).status_code == 201
        with hung(postgres_server), ThreadPoolExecutor(4) as pool:
            add = pool.submit(timed, client.post, "/quotes", json={"quote": "added while hung"})
            time.sleep(0.5)  # the add now waits on the database
            remove = pool.submit(timed, client.delete, "/quotes/0")
            for _ in range(3):
                reads = [
                    pool.submit(timed, client.get, "/health"),
                    pool.submit(timed, client.post, "/recommend", json={"left": "the cat", "k": 2}),
                    pool.submit(timed, client.get, "/quotes", params={"limit": 100}),
                ]
                for read in reads:
                    response, seconds = read.result(timeout=READ_S)
                    assert response.status_code == 200 and seconds < READ_S
            for change in (add, remove):
                response, seconds = change.result(timeout=CHANGE_BOUND_S + 5)
                assert response.status_code == 503 and seconds < CHANGE_BOUND_S
                assert response.headers["retry-after"] == str(STORE_RETRY_AFTER_S)
                [error] = response.json()["detail"]
                assert "not made" in error["msg"]
        # The database is back: the lost connection is made again.
        added = client.post("/quotes", json={"quote": "added after"})
        assert added.status_code == 201, added.text
        quotes = client.get("/quotes", params={"limit": 100}).text
        assert "added while hung" not in quotes and "added after" in quotes


class CommitCutter:
    """A TCP proxy in front of the database that cuts the connection the next COMMIT goes through: after passing
    it on (the change is made, its answer is lost) or instead (the change is not made); and that can refuse
    every new connection."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.cut: str | None = None  # "made" or "lost", for the next COMMIT
        self.refusing = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database_url: str) -> str:
        return database_url.replace(f":{self.target}/", f":{self.port}/")

    def close(self) -> None:
        self._closing.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                cut = self.cut if from_client and b"COMMIT" in data else None
                if cut is not None:
                    self.cut = None
                    if cut == "made":
                        sink.sendall(data)
                    source.shutdown(socket.SHUT_RDWR)  # the client's connection ends before the answer
                    if cut == "lost":
                        sink.shutdown(socket.SHUT_RDWR)
                    return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()


@pytest.fixture
def cutter(postgres_server: PostgresServer) -> Iterator[CommitCutter]:
    proxy = CommitCutter(postgres_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def opened() -> Iterator[list[LiveQuotes]]:
    sets: list[LiveQuotes] = []
    yield sets
    for live in sets:
        live.close()


def listed_texts(live: LiveQuotes) -> dict[int, str]:
    _, page = live.browse(0, 10_000)
    return {quote_id: record.text for quote_id, record in page}


def wait_for(condition) -> None:
    deadline = time.monotonic() + FOLLOW_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "not caught up in time"
        time.sleep(0.05)


def test_a_commit_whose_answer_was_lost_is_found_made_and_acknowledged(postgres_url, bundle, cutter, opened):
    live = shared_quotes(cutter.url(postgres_url), bundle)
    opened.append(live)
    cutter.cut = "made"
    quote_id, created = live.add(QuoteRecord("committed as the line went down"))
    assert created and cutter.cut is None  # the cut happened
    assert listed_texts(live)[quote_id] == "committed as the line went down"
    other = shared_quotes(postgres_url, bundle)
    opened.append(other)
    assert listed_texts(other) == listed_texts(live)  # once, under that id, in the database too


def test_a_commit_that_never_arrived_is_found_not_made(postgres_url, bundle, cutter, opened):
    live = shared_quotes(cutter.url(postgres_url), bundle)
    opened.append(live)
    before = listed_texts(live)
    cutter.cut = "lost"
    with pytest.raises(StoreUnavailableError, match="not saved"):
        live.add(QuoteRecord("never committed"))
    assert listed_texts(live) == before
    assert live.add(QuoteRecord("never committed"))[1]  # a retry makes it


def test_a_commit_whose_fate_cannot_be_asked_is_outcome_unknown_and_a_retry_is_safe(
    postgres_url, bundle, cutter, opened
):
    live = shared_quotes(cutter.url(postgres_url), bundle)
    opened.append(live)
    live.add(QuoteRecord("made before, over the connection the next change uses"))
    cutter.cut = "made"
    cutter.refusing = True  # from the cut on: the question whether it was made cannot be asked
    with pytest.raises(OutcomeUnknownError, match="may have been made or not|cannot be asked"):
        live.add(QuoteRecord("made, unbeknown to the writer"))
    cutter.refusing = False
    # The follower's connection was not cut: it brings the change in, and a retry gets the same id.
    wait_for(lambda: "made, unbeknown to the writer" in listed_texts(live).values())
    quote_id = live.id_of("made, unbeknown to the writer")
    assert live.add(QuoteRecord("made, unbeknown to the writer")) == (quote_id, False)


def test_outcome_unknown_is_a_503_of_its_own(postgres_url, bundle, cutter):
    recommender = Recommender(bundle, database=cutter.url(postgres_url))
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "made before"}).status_code == 201
        cutter.cut, cutter.refusing = "made", True
        response = client.post("/quotes", json={"quote": "fate unknown"})
        cutter.refusing = False
        assert response.status_code == 503 and response.headers["retry-after"] == str(STORE_RETRY_AFTER_S)
        [error] = response.json()["detail"]
        assert error["type"] == "outcome_unknown" and "may have been made" in error["msg"]
        wait_for(lambda: "fate unknown" in client.get("/quotes", params={"limit": 100}).text)
        again = client.post("/quotes", json={"quote": "fate unknown"})
        assert again.status_code == 200 and again.json()["created"] is False


def test_a_removal_on_a_process_behind_removes_a_quote_the_database_holds(postgres_url, bundle, opened):
    ahead, behind = shared_quotes(postgres_url, bundle), shared_quotes(postgres_url, bundle)
    opened.extend([ahead, behind])
    behind.close()  # it follows no more: its set in memory has not seen the add
    quote_id, _ = ahead.add(QuoteRecord("added through the other replica"))
    assert quote_id not in listed_texts(behind)
    assert behind.remove(quote_id).text == "added through the other replica"
    assert quote_id not in listed_texts(behind)
    wait_for(lambda: quote_id not in listed_texts(ahead))
