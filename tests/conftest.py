"""Shared test fixtures: small QuoteR files written into a temporary folder, a private cache, `quoter serve`
run without opening a port, and a PostgreSQL server (postgres_fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from quoter.cli import app
from tests.postgres_fixtures import postgres_server, postgres_url  # noqa: F401  (fixtures for every test module)
from tests.serving_fixtures import LOOPBACK_URL


def write_quoter_file(
    folder: Path, rows: list[tuple[str, str, str]], splits: dict | None = None, name: str = "data.txt"
) -> Path:
    """Write rows as a QuoteR TSV file, and its splits as NAME.splits.json when given."""
    path = folder / name
    path.write_text("".join(f"{l}\t{q}\t{r}\n" for l, q, r in rows), encoding="utf-8")
    if splits is not None:
        path.with_name(path.stem + ".splits.json").write_text(json.dumps(splits), encoding="utf-8")
    return path


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory):
    """$QUOTER_CACHE in a temporary folder: what the tests export (ONNX graphs of tiny models) stays out of
    the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("QUOTER_CACHE", str(tmp_path_factory.mktemp("quoter-cache")))
        yield


@pytest.fixture(autouse=True)
def private_state(tmp_path_factory, monkeypatch):
    """$XDG_STATE_HOME in a temporary folder of each test's own: a server started without --state keeps its quote
    changes, and its hold on them, out of the user's state folder and out of the other tests' way."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))


@pytest.fixture
def write_dataset(tmp_path):
    """Write a QuoteR file (and optional splits) into tmp_path; returns its path."""

    def write(rows, splits=None, name="data.txt"):
        return write_quoter_file(tmp_path, rows, splits, name)

    return write


@pytest.fixture
def served(monkeypatch):
    """Run `quoter serve ...` with uvicorn.run replaced: return the app it would serve, where and how. Each run
    first stops the servers run before, as a server's process ends (their hold on their quote sets is let go),
    unless `stop_earlier` is false; the last ones stop with the test."""
    calls = {}
    running = []

    def fake_run(app, host, port, **options):
        calls.update(app=app, host=host, port=port, options=options)
        running.append(app)

    def stop_all() -> None:
        while running:
            with TestClient(running.pop(), base_url=LOOPBACK_URL):  # its shutdown closes its recommenders
                pass

    monkeypatch.setattr(uvicorn, "run", fake_run)

    def serve(*args, env=None, stop_earlier=True):
        if stop_earlier:
            stop_all()
        result = CliRunner().invoke(app, ["serve", *map(str, args)], env=env)
        return result, calls

    yield serve
    stop_all()
