"""A quote change the live store cannot save is refused with a status the client can act on, never a bare 500:
a read-only bundle served without a state folder (503), a full disk (503 with Retry-After), another server
holding the same quote set, or having changed it since this one loaded it (409). The change is not made, the
message names no server path, and the operator's log says why in one line, without a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from quoter.bundle import Bundle, QuoteRecord
from quoter.serving.http.app import NO_SPACE_RETRY_AFTER_S, AppConfig, create_app
from quoter.serving.live.live_quotes import LiveQuotes
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle

NEW = {"quote": "a line that cannot be kept"}
ERROR_LOGGER = "quoter.serving.http.api_errors"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return tiny_bundle(tmp_path_factory.mktemp("bundle"))


def listed(client: TestClient) -> list[tuple[int, str]]:
    """Every quote the server lists, with its id."""
    return [(quote["id"], quote["quote"]) for quote in client.get("/quotes", params={"limit": 100}).json()["quotes"]]


def error_of(response) -> dict:
    [error] = response.json()["detail"]
    return error


def logged(caplog, cause: str) -> None:
    """The operator's log has the refusals, each one line naming its cause, without a traceback."""
    records = [record for record in caplog.records if record.name == ERROR_LOGGER]
    assert records and all(cause in r.getMessage() and "\n" not in r.getMessage() for r in records)
    assert all(record.exc_info is None for record in records)


def another_server_changes(bundle: Bundle, state: Path) -> LiveQuotes:
    """The quote set of another server over the same state folder, which has made a change: it holds the lock."""
    other = LiveQuotes.from_bundle(bundle, folder=state)
    assert other.add(QuoteRecord("a line another server added")) == (5, True)
    return other


def test_a_read_only_bundle_without_a_state_folder_is_503_saying_so(bundle, tmp_path, monkeypatch, caplog):
    folder = tmp_path / "bundle"
    bundle.save(folder)
    recommender = Recommender(Bundle.load(folder), folder=folder)
    # Served from a read-only file system, where root cannot write either: no folder can be made in it.
    make_folder = Path.mkdir

    def read_only(path: Path, *args, **kwargs) -> None:
        if path.is_relative_to(folder):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        make_folder(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client, caplog.at_level("ERROR"):
        before = listed(client)
        for response in (client.post("/quotes", json=NEW), client.delete("/quotes/0")):
            assert response.status_code == 503 and "retry-after" not in response.headers
            error = error_of(response)
            assert error["type"] == "not_saved" and "not made" in error["msg"]
            assert "cannot be written" in error["msg"] and "--state" in error["msg"]
            assert str(tmp_path) not in response.text
        assert listed(client) == before
    assert not (folder / "quote_index").exists()
    logged(caplog, "Read-only file system")


def test_a_full_disk_is_503_with_retry_after_and_the_change_is_made_once_there_is_room(
    bundle, tmp_path, monkeypatch, caplog
):
    recommender = Recommender(bundle, state=tmp_path / "state")
    write = os.pwrite

    def disk_full(fd: int, data: bytes, offset: int) -> int:
        write(fd, data[:10], offset)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client, caplog.at_level("ERROR"):
        before = listed(client)
        monkeypatch.setattr(os, "pwrite", disk_full)
        for response in (client.post("/quotes", json=NEW), client.delete("/quotes/0")):
            assert response.status_code == 503 and response.headers["retry-after"] == str(NO_SPACE_RETRY_AFTER_S)
            error = error_of(response)
            assert error["type"] == "no_space" and "not made" in error["msg"] and "retry later" in error["msg"]
            assert str(tmp_path) not in response.text
        assert listed(client) == before
        monkeypatch.undo()
        assert client.post("/quotes", json=NEW).status_code == 201
        assert listed(client) == [*before, (5, NEW["quote"])]
    logged(caplog, "No space left on device")


def test_another_server_changing_the_same_quote_set_is_409(bundle, tmp_path, caplog):
    state = tmp_path / "state"
    recommender = Recommender(bundle, state=state)
    other = another_server_changes(bundle, state)
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client, caplog.at_level("ERROR"):
        before = listed(client)
        for response in (client.post("/quotes", json=NEW), client.delete("/quotes/0")):
            assert response.status_code == 409 and "retry-after" not in response.headers
            error = error_of(response)
            assert error["type"] == "locked" and "another server is changing" in error["msg"]
            assert "not made" in error["msg"] and str(tmp_path) not in response.text
        assert listed(client) == before
    assert len(other) == 6
    logged(caplog, "another process is changing these quotes")


def test_a_quote_set_another_server_changed_since_it_was_loaded_is_409(bundle, tmp_path, caplog):
    state = tmp_path / "state"
    recommender = Recommender(bundle, state=state)
    other = another_server_changes(bundle, state)
    del other  # that server stops: its lock goes, its change stays
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client, caplog.at_level("ERROR"):
        before = listed(client)
        for response in (client.post("/quotes", json=NEW), client.delete("/quotes/0")):
            assert response.status_code == 409 and "retry-after" not in response.headers
            error = error_of(response)
            assert error["type"] == "out_of_date" and "restarted" in error["msg"]
            assert "not made" in error["msg"] and str(tmp_path) not in response.text
        assert listed(client) == before
    logged(caplog, "changed these quotes since they were loaded")
