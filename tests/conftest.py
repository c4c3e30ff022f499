"""Shared test fixtures: small QuoteR files written into a temporary folder, a private cache, `quoter serve`
run without opening a port, and a PostgreSQL server (postgres_fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from quoter.cli import app
from tests.postgres_fixtures import postgres_server, postgres_url  # noqa: F401  (fixtures for every test module)


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


@pytest.fixture
def write_dataset(tmp_path):
    """Write a QuoteR file (and optional splits) into tmp_path; returns its path."""

    def write(rows, splits=None, name="data.txt"):
        return write_quoter_file(tmp_path, rows, splits, name)

    return write


@pytest.fixture
def served(monkeypatch):
    """Run `quoter serve ...` with uvicorn.run replaced: return the app it would serve, where and how."""
    calls = {}

    def fake_run(app, host, port, **options):
        calls.update(app=app, host=host, port=port, options=options)

    monkeypatch.setattr(uvicorn, "run", fake_run)

    def serve(*args, env=None):
        result = CliRunner().invoke(app, ["serve", *map(str, args)], env=env)
        return result, calls

    return serve
