"""The built-in default server keeps the quote changes it acknowledged: in --state, $QUOTER_STATE or
$XDG_STATE_HOME/quoter, through a SIGKILL, with no id given twice."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import quoter.default_bundles as default_bundles
from quoter.bundle import QuoteRecord
from quoter.cli import app
from quoter.languages import Language
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.serving_fixtures import LOOPBACK_URL, QUOTES

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 240
ADDERS = 4
ADD_TIMEOUT_S = 10  # for one add, and then for the adders to stop
ADDS_BEFORE_KILL = 40
ADDS_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_default_server(state: Path, port: int, log: Path) -> subprocess.Popen:
    """The README's `python serve.py`, English only and on torch so that it starts in seconds."""
    command = [sys.executable, "serve.py", "--lang", "en", "--runtime", "torch", "--port", str(port)]
    command += ["--state", str(state), "--threads", "1"]
    with log.open("ab") as output:
        server = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server stopped: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    pytest.fail(f"the server did not answer in {START_TIMEOUT_S} s: {log.read_text()}")


def post_quote(port: int, text: str) -> int | None:
    """The id the server acknowledged for `text`, or None when it did not answer 201 (killed meanwhile)."""
    body = json.dumps({"quote": text, "source": "test", "lang": "en"}).encode("utf-8")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/quotes", body, {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=ADD_TIMEOUT_S) as response:
            return json.load(response)["id"] if response.status == 201 else None
    except (OSError, urllib.error.HTTPError):
        return None


def wait_for_adds(acknowledged: dict[str, int], adders: list[Future], log: Path) -> None:
    """Wait until ADDS_BEFORE_KILL adds are acknowledged; fail as soon as an adder stops (it raises its error
    here), or after ADDS_TIMEOUT_S."""
    deadline = time.monotonic() + ADDS_TIMEOUT_S
    while len(acknowledged) < ADDS_BEFORE_KILL:
        for adder in adders:
            if adder.done():
                adder.result()
                pytest.fail(f"an add failed after {len(acknowledged)} adds: {log.read_text()}")
        assert time.monotonic() < deadline, f"only {len(acknowledged)} adds in {ADDS_TIMEOUT_S} s"
        time.sleep(0.02)


def listed_quotes(port: int) -> dict[str, int]:
    """The quotes the test added that the server lists, page by page, with their ids."""
    listed: dict[str, int] = {}
    while True:
        url = f"http://127.0.0.1:{port}/quotes?q=kill-test&limit=100&offset={len(listed)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            page = json.load(response)
        listed.update((quote["quote"], quote["id"]) for quote in page["quotes"])
        if len(listed) >= page["total"]:
            return listed


# Two starts of the server, each allowed START_TIMEOUT_S, and the adds between: beyond the suite's limit.
@pytest.mark.timeout(2 * START_TIMEOUT_S + ADDS_TIMEOUT_S + 120)
def test_the_default_server_keeps_every_acknowledged_add_through_sigkill(tmp_path):
    state, port, log = tmp_path / "state", free_port(), tmp_path / "server.log"
    server = start_default_server(state, port, log)
    acknowledged: dict[str, int] = {}
    stop = threading.Event()

    def add_quotes(adder: int) -> None:
        number = 0
        while not stop.is_set():
            text = f"kill-test quote {adder}-{number}"
            quote_id = post_quote(port, text)
            if quote_id is None:
                return
            acknowledged[text] = quote_id
            number += 1

    with ThreadPoolExecutor(ADDERS) as pool:
        adders = [pool.submit(add_quotes, adder) for adder in range(ADDERS)]
        try:
            wait_for_adds(acknowledged, adders, log)
            server.send_signal(signal.SIGKILL)  # while the adders are sending more
            server.wait(ADD_TIMEOUT_S)
        finally:
            stop.set()
            server.kill()
        for adder in adders:
            adder.result(ADD_TIMEOUT_S)
    assert len(set(acknowledged.values())) == len(acknowledged)

    server = start_default_server(state, port, log)
    try:
        listed = listed_quotes(port)
        # Every acknowledged add is back under its id; an add cut off before its answer may or may not be.
        assert {text: listed[text] for text in acknowledged if text in listed} == acknowledged
        assert set(acknowledged) <= set(listed)
        new_id = post_quote(port, "kill-test quote after the restart")
        assert new_id is not None and new_id not in listed.values() and new_id > max(listed.values())
    finally:
        server.kill()
        server.wait(ADD_TIMEOUT_S)


@pytest.fixture
def tiny_default(tmp_path, monkeypatch):
    """The built-in default served in process, over a tiny model and QUOTES instead of the real bank."""
    tokenizer = tiny_tokenizer(tmp_path / "model")
    tiny_model(tokenizer).save_pretrained(tmp_path / "model")
    monkeypatch.setattr(default_bundles, "default_model", lambda language: str(tmp_path / "model"))
    bank = dict(QUOTES)
    monkeypatch.setattr(default_bundles, "load_quote_bank", lambda language: bank[language])
    return bank


def test_without_a_state_folder_the_default_saves_in_xdg_state_home(served, tiny_default, tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "xdg"), "QUOTER_API_KEY": "k"}
    result, calls = served("--lang", "en", env=env)
    assert result.exit_code == 0, result.output
    assert f"saved in {tmp_path / 'xdg' / 'quoter'}" in result.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        added = client.post("/quotes", json={"quote": "a new line", "lang": "en"}, headers={"X-API-Key": "k"})
        assert added.status_code == 201
    assert (tmp_path / "xdg" / "quoter" / "en" / "quote_index").is_dir()
    result, calls = served("--lang", "en", env=env)
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        listed = client.get("/quotes", params={"q": "a new line"}).json()["quotes"]
    assert [(q["id"], q["quote"]) for q in listed] == [(added.json()["id"], "a new line")]


def test_changes_made_to_another_bank_are_refused_not_mixed(served, tiny_default, tmp_path):
    state = tmp_path / "state"
    result, calls = served("--lang", "en", "--state", str(state))
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "a new line", "lang": "en"}).status_code == 201
    # A newer bank: the saved ids and vectors were made for the old one.
    tiny_default[Language.EN] = [*QUOTES[Language.EN], QuoteRecord("a line the bank gained", "")]
    result, _ = served("--lang", "en", "--state", str(state))
    assert result.exit_code != 0
    message = str(result.exception)
    assert str(state / "en") in message and "another quote set (5 quotes" in message and "(6 quotes" in message


def test_quoter_batch_on_the_default_ranks_the_quotes_the_server_added(served, tiny_default, tmp_path):
    state = tmp_path / "state"
    result, calls = served("--lang", "en", "--state", str(state))
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "a new line", "lang": "en"}).status_code == 201
    contexts, output = tmp_path / "contexts.jsonl", tmp_path / "top.jsonl"
    contexts.write_text(json.dumps({"left": "the cat", "right": ""}) + "\n", encoding="utf-8")
    env = {**os.environ, "QUOTER_STATE": str(state)}
    arguments = ["batch", "--lang", "en", "--input", str(contexts), "--output", str(output), "--k", "10"]
    ran = CliRunner().invoke(app, arguments, env=env)
    assert ran.exit_code == 0, ran.output
    ranked = [quote["quote"] for quote in json.loads(output.read_text(encoding="utf-8"))["results"]]
    assert sorted(ranked) == sorted([q.text for q in QUOTES[Language.EN]] + ["a new line"])
