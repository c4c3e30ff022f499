"""An API key given empty is an error of one line, before any model loads: it used to turn authentication off
(QUOTER_API_KEY="" served every add and removal without a key). A write without its key is refused before
anything about its body is read: 401 or 403, not 413, 415 or 400."""

import asyncio
import sys

import httpx
import pytest
from fastapi.testclient import TestClient

import quoter.cli
from quoter.cli.serve_commands import read_api_key
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ([], {"QUOTER_API_KEY": ""}),
        ([], {"QUOTER_API_KEY": "  "}),
        (["--api-key", ""], None),
        (["--api-key", " \t"], None),
    ],
)
def test_an_empty_key_is_refused_in_one_line_with_status_2(args, env, monkeypatch, capsys):
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["quoter", "serve", *args])
    with pytest.raises(SystemExit) as stopped:
        quoter.cli.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        "error: the API key is empty (--api-key or QUOTER_API_KEY); give a key, or unset it to serve without one\n"
    )


def test_an_empty_key_file_or_file_variable_is_refused(tmp_path, monkeypatch):
    empty = tmp_path / "key"
    empty.write_text(" \n", encoding="utf-8")
    with pytest.raises(QuoterError, match="the API key file is empty"):
        read_api_key(None, empty)
    monkeypatch.setenv("QUOTER_API_KEY_FILE", "")
    with pytest.raises(QuoterError, match="QUOTER_API_KEY_FILE is empty"):
        read_api_key(None, None)


def test_a_key_is_read_without_surrounding_white_space(tmp_path, monkeypatch):
    monkeypatch.delenv("QUOTER_API_KEY", raising=False)
    monkeypatch.delenv("QUOTER_API_KEY_FILE", raising=False)
    assert read_api_key(None, None) is None  # no key: changes open, as on a loopback server
    assert read_api_key(" s3cret\n", None) == "s3cret"
    key_file = tmp_path / "key"
    key_file.write_text("from-a-file\n", encoding="utf-8")
    assert read_api_key(None, key_file) == "from-a-file"


@pytest.fixture(scope="module")
def keyed_app(tmp_path_factory):
    bundle = tiny_bundle(tmp_path_factory.mktemp("bundle"), Language.EN)
    return create_app([Recommender(bundle)], AppConfig(api_key="k"))


@pytest.mark.parametrize(
    ("body", "content_type", "with_the_key"),
    [
        (b'{"quote": "' + b"a" * 3_000_000 + b'"}', "application/json", 413),
        (b'{"quote": ', "application/json", 400),
        (b'{"quote": "a dog"}', "text/plain", 415),
    ],
)
def test_the_key_is_checked_before_anything_about_the_body(keyed_app, body, content_type, with_the_key):
    # Without the key or with another, these got what the key now gets only: their body's error.
    with TestClient(keyed_app, base_url=LOOPBACK_URL) as client:
        missing = client.post("/quotes", content=body, headers={"Content-Type": content_type})
        wrong = client.post("/quotes", content=body, headers={"Content-Type": content_type, "X-API-Key": "no"})
        right = client.post("/quotes", content=body, headers={"Content-Type": content_type, "X-API-Key": "k"})
    assert (missing.status_code, missing.json()["detail"][0]["type"]) == (401, "api_key_missing")
    assert (wrong.status_code, wrong.json()["detail"][0]["type"]) == (403, "api_key_wrong")
    assert right.status_code == with_the_key


def test_a_request_without_the_key_is_refused_without_waiting_for_its_body(keyed_app):
    async def never_ending():
        yield b'{"quote": '
        await asyncio.Event().wait()  # the rest never comes

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=keyed_app)
        async with httpx.AsyncClient(transport=transport, base_url=LOOPBACK_URL) as client:
            headers = {"Content-Type": "application/json"}
            return await client.post("/quotes", content=never_ending(), headers=headers)

    # The body's own deadline is 60 s: a check after the body would still be waiting.
    response = asyncio.run(asyncio.wait_for(post(), 10))
    assert response.status_code == 401


def test_the_openapi_document_keeps_the_key_on_the_write_routes(keyed_app):
    with TestClient(keyed_app, base_url=LOOPBACK_URL) as client:
        document = client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["APIKeyHeader"] == {
        "type": "apiKey", "description": "The server's API key.", "in": "header", "name": "X-API-Key"
    }  # fmt: skip
    operations = [("/quotes", "post"), ("/quotes/{quote_id}", "delete"), ("/quotes", "get"), ("/recommend", "post")]
    assert [document["paths"][path][method].get("security") for path, method in operations] == [
        [{"APIKeyHeader": []}], [{"APIKeyHeader": []}], None, None
    ]  # fmt: skip
