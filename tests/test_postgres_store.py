"""The live quote set shared in PostgreSQL (`--store`): ids are never given twice, adds from two processes at once
all land and both follow each other's changes, a process killed while adding loses nothing it acknowledged, a
database that goes away refuses changes with 503 while recommendations go on and is caught up with when it is
back, and a set whose changes were made to another base set is refused. A real server: postgres_fixtures."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from quoter.bundle import Bundle, QuoteRecord
from quoter.cli import app
from quoter.errors import QuoterError
from quoter.quote_set import encode_quote_set
from quoter.serving.http.app import STORE_RETRY_AFTER_S, AppConfig, create_app
from quoter.serving.live.live_quotes import LiveQuotes, QuoteConflictError, UnknownQuoteError
from quoter.serving.live.postgres_store import shared_quotes
from quoter.serving.recommender import Recommender
from tests.postgres_fixtures import PostgresServer
from tests.serving_fixtures import LOOPBACK_URL, QUOTES, tiny_bundle

ROOT = Path(__file__).resolve().parent.parent
BASE = len(QUOTES[next(iter(QUOTES))])
FOLLOW_TIMEOUT_S = 20
ADDS_TIMEOUT_S = 60  # for one writer's 16 adds, on a loaded machine
PASSWORD = "a-secret-password"  # trust authentication lets any through; no message may show it
# Run in a child process: open the shared set of a tiny bundle and add quotes one by one, printing each
# acknowledged id, until killed.
ADDER = """
import sys
from pathlib import Path
from quoter.bundle import QuoteRecord
from quoter.serving.live.postgres_store import shared_quotes
from tests.serving_fixtures import tiny_bundle

live = shared_quotes(sys.argv[1], tiny_bundle(Path(sys.argv[2])))
number = 0
while True:
    quote_id, _ = live.add(QuoteRecord(f"killed adder's quote {number}"))
    print(quote_id, number, flush=True)
    number += 1
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Bundle:
    return tiny_bundle(tmp_path_factory.mktemp("bundle"))


@pytest.fixture
def opened() -> Iterator[Callable[..., LiveQuotes]]:
    """Open shared live sets as separate processes would (each with its own connections); closed at the end."""
    sets: list[LiveQuotes] = []

    def open_set(url: str, bundle: Bundle, **options) -> LiveQuotes:
        sets.append(shared_quotes(url, bundle, **options))
        return sets[-1]

    yield open_set
    for live in sets:
        live.close()


def listed(live: LiveQuotes) -> dict[int, str]:
    total, page = live.browse(0, 10_000)
    assert total == len(page)
    return {quote_id: record.text for quote_id, record in page}


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + FOLLOW_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "not caught up in time"
        time.sleep(0.05)


def test_a_removed_id_is_never_given_again_not_even_after_a_restart(postgres_url, bundle, opened):
    first = opened(postgres_url, bundle)
    assert len(first) == BASE
    added, _ = first.add(QuoteRecord("a line to remove"))
    first.remove(added)
    again, created = first.add(QuoteRecord("a line to remove"))
    assert created and again == added + 1
    first.close()  # the process stops
    restarted = opened(postgres_url, bundle)
    assert listed(restarted) == listed(first) and added not in listed(restarted)
    assert restarted.add(QuoteRecord("one more line")) == (again + 1, True)


def test_adds_from_two_processes_at_once_all_land_and_both_follow(postgres_url, bundle, opened):
    sets = [opened(postgres_url, bundle), opened(postgres_url, bundle)]

    def add_quotes(writer: int) -> dict[str, tuple[int, bool]]:
        """What the writer added: each text's id, and whether it was new."""
        texts = [f"writer {writer} line {number}" for number in range(15)]
        added = {text: sets[writer].add(QuoteRecord(text)) for text in texts}
        # Both list this one at once: it gets one id, whoever wins.
        added[f"shared by {writer}"] = sets[writer].add(QuoteRecord("a line both add"))
        return added

    # The assertions run here: an error in a writer is raised by its result.
    with ThreadPoolExecutor(2) as pool:
        writers = [pool.submit(add_quotes, writer) for writer in range(2)]
        added = {text: result for writer in writers for text, result in writer.result(ADDS_TIMEOUT_S).items()}
    assert all(created for text, (_, created) in added.items() if text.startswith("writer"))
    acknowledged = {text: quote_id for text, (quote_id, _) in added.items()}
    assert acknowledged["shared by 0"] == acknowledged["shared by 1"]
    del acknowledged["shared by 1"]
    assert len(set(acknowledged.values())) == len(acknowledged) == 31
    assert min(acknowledged.values()) >= BASE
    # Each set follows the other's adds, through the notifications.
    wait_for(lambda: len(sets[0]) == len(sets[1]) == BASE + 31)
    assert listed(sets[0]) == listed(sets[1])
    assert sets[0].fingerprint() == sets[1].fingerprint()  # vectors too
    assert {text: listed(sets[0])[quote_id] for text, quote_id in acknowledged.items()} == {
        text: "a line both add" if text.startswith("shared") else text for text in acknowledged
    }


def test_a_change_that_lost_the_race_to_another_process_catches_up_first(postgres_url, bundle, opened):
    ahead, behind = opened(postgres_url, bundle), opened(postgres_url, bundle)
    behind.close()  # it follows no more, so its set in memory stays behind until it changes the set
    quote_id, _ = ahead.add(QuoteRecord("listed by the other process", "Elsewhere"))
    ahead.remove(0)
    # The same text: the id the other process gave it; with another source: refused, as for a listed quote.
    assert behind.add(QuoteRecord("listed by the other process")) == (quote_id, False)
    with pytest.raises(QuoteConflictError, match=f"as id {quote_id}, with another source"):
        behind.add(QuoteRecord("listed by the other process", "Here"))
    assert 0 not in listed(behind)
    with pytest.raises(UnknownQuoteError):
        behind.remove(0)
    assert listed(behind) == listed(ahead)


def test_a_process_killed_while_adding_loses_no_acknowledged_add(postgres_url, bundle, opened, tmp_path):
    opened(postgres_url, bundle)  # the set is seeded before the child starts
    command = [sys.executable, "-c", ADDER, postgres_url, str(tmp_path / "child")]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acknowledged = {}
    try:
        assert child.stdout is not None
        for line in child.stdout:
            quote_id, number = line.split()
            acknowledged[int(quote_id)] = f"killed adder's quote {number}"
            if len(acknowledged) == 30:
                child.send_signal(signal.SIGKILL)  # while it adds more
                break
        else:
            pytest.fail(f"the adder stopped: {child.stderr.read() if child.stderr else ''}")
    finally:
        child.kill()
        child.wait()
    reloaded = listed(opened(postgres_url, bundle))
    assert {quote_id: reloaded.get(quote_id) for quote_id in acknowledged} == acknowledged


def test_a_database_that_goes_away_refuses_changes_with_503_and_is_caught_up_with_when_back(
    postgres_server: PostgresServer, postgres_url, bundle, opened, caplog
):
    url = postgres_url.replace("postgres@", f"postgres:{PASSWORD}@")
    recommender = Recommender(bundle, database=url)
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "added before"}).status_code == 201
        postgres_server.stop()
        try:
            with caplog.at_level(logging.WARNING):
                refused = [client.post("/quotes", json={"quote": "added while away"}), client.delete("/quotes/0")]
                for response in refused:
                    assert response.status_code == 503
                    assert response.headers["retry-after"] == str(STORE_RETRY_AFTER_S)
                    [error] = response.json()["detail"]
                    assert error["type"] == "store_unavailable" and "not made" in error["msg"]
                    assert "database" in error["msg"] and "127.0.0.1" not in response.text
                found = client.post("/recommend", json={"left": "the cat", "right": "", "k": 2})
                assert found.status_code == 200 and len(found.json()["results"]) == 2
        finally:
            postgres_server.start()
        assert caplog.records and all(PASSWORD not in record.getMessage() for record in caplog.records)
        assert any("cannot be reached" in record.getMessage() for record in caplog.records)
        # Another process changes the set while this one may still be reconnecting.
        other_id, _ = opened(postgres_url, bundle).add(QuoteRecord("added by another process"))

        def caught_up() -> bool:
            return other_id in {q["id"] for q in client.get("/quotes", params={"limit": 100}).json()["quotes"]}

        wait_for(caught_up)
        assert "added while away" not in client.get("/quotes", params={"limit": 100}).text
        added = client.post("/quotes", json={"quote": "added after"})
        assert added.status_code == 201 and added.json()["id"] == other_id + 1
        assert client.delete("/quotes/0").status_code == 200


def test_a_set_changed_over_another_base_set_is_refused(postgres_url, bundle, opened):
    opened(postgres_url, bundle).add(QuoteRecord("a new line"))
    grown = encode_quote_set(bundle.quote_encoder, [*bundle.quotes, QuoteRecord("a line the bank gained")])
    with pytest.raises(QuoterError) as refused:
        opened(postgres_url, bundle, quotes=grown)
    message = str(refused.value)
    assert message.startswith("quote set 'en' in PostgreSQL database ")
    assert f"another quote set ({BASE} quotes" in message and f"({BASE + 1} quotes" in message


def test_quoter_serve_and_batch_share_the_set_in_the_store(served, postgres_url, bundle, tmp_path):
    folder = tmp_path / "bundle"
    bundle.save(folder)
    result, calls = served("--bundle", f"en={folder}", "--store", postgres_url)
    assert result.exit_code == 0, result.output
    assert postgres_url not in result.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "a line the server added"}).status_code == 201
    assert not (folder / "quote_index").exists()
    contexts, output = tmp_path / "contexts.jsonl", tmp_path / "top.jsonl"
    contexts.write_text('{"left": "the cat", "right": ""}\n', encoding="utf-8")
    arguments = ["batch", "--bundle", str(folder), "--input", str(contexts), "--output", str(output), "--k", "10"]
    ran = CliRunner().invoke(app, arguments, env={"QUOTER_STORE": postgres_url})
    assert ran.exit_code == 0, ran.output
    assert "a line the server added" in output.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ("not a url", "not a PostgreSQL URL"),
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/quoter", "cannot reach the database"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line_without_the_password(served, bundle, tmp_path, store, expected):
    folder = tmp_path / "bundle"
    bundle.save(folder)
    result, _ = served("--bundle", f"en={folder}", "--store", store)
    assert isinstance(result.exception, QuoterError)
    message = str(result.exception)
    assert expected in message and "\n" not in message and PASSWORD not in message


def test_store_and_state_exclude_each_other(served, tmp_path):
    result, _ = served("--store", "postgresql://localhost/quoter", "--state", str(tmp_path))
    assert isinstance(result.exception, QuoterError) and "--store" in str(result.exception)
