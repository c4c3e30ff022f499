"""`quoter serve` / serve.py: options, hosted bundles and the built-in default, without opening a port."""

import pytest
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import quoter.quote_bank
import quoter.serving.hosting as hosting
from quoter.cli import app
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.serving.hosting import parse_bundle_spec
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.serving_fixtures import QUOTES, tiny_bundle


@pytest.fixture
def served(monkeypatch):
    """Run `quoter serve ...` with uvicorn.run replaced: return the app it would serve and where."""
    calls = {}

    def fake_run(app, host, port, **options):
        calls.update(app=app, host=host, port=port)

    monkeypatch.setattr(uvicorn, "run", fake_run)

    def serve(*args, env=None):
        result = CliRunner().invoke(app, ["serve", *map(str, args)], env=env)
        return result, calls

    return serve


def test_serve_hosts_the_given_bundles_with_an_api_key(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    tiny_bundle(tmp_path / "zh", Language.ZH).save(tmp_path / "bundle-zh")
    result, calls = served(
        "--bundle", f"en={tmp_path / 'bundle-en'}", "--bundle", f"zh={tmp_path / 'bundle-zh'}", "--port", 9123,
        env={"QUOTER_API_KEY": "k"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert calls["host"] == "127.0.0.1" and calls["port"] == 9123
    with TestClient(calls["app"]) as client:
        assert client.get("/health").json()["languages"] == ["en", "zh"]
        assert client.post("/quotes", json={"quote": "the mat", "lang": "en"}).status_code == 401
        added = client.post("/quotes", json={"quote": "the mat", "lang": "en"}, headers={"X-API-Key": "k"})
        assert added.status_code == 201
    # The change was saved into the bundle folder: a new server lists the quote under the same id.
    result, calls = served("--bundle", f"en={tmp_path / 'bundle-en'}")
    with TestClient(calls["app"]) as client:
        listed = client.get("/quotes", params={"q": "the mat"}).json()["quotes"]
        assert {q["quote"]: q["id"] for q in listed}["the mat"] == added.json()["id"]


def test_serve_refuses_bad_bundle_options(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    result, _ = served("--bundle", f"zh={tmp_path / 'bundle-en'}")
    assert "the bundle's language is en, not zh" in str(result.exception)
    result, _ = served("--bundle", f"en={tmp_path / 'bundle-en'}", "--lang", "en")
    assert "--lang chooses among the built-in bundles" in str(result.exception)
    with pytest.raises(QuoterError, match="expects LANG=DIR"):
        parse_bundle_spec("models/en")
    with pytest.raises(QuoterError, match="unknown language 'fr'"):
        parse_bundle_spec("fr=models/fr")
    assert parse_bundle_spec("zh-classical=a/b") == (Language.ZH_CLASSICAL, tmp_path.__class__("a/b"))


def test_without_bundles_the_quote_bank_is_served_zero_shot(served, tmp_path, monkeypatch):
    tokenizer = tiny_tokenizer(tmp_path / "model")
    tiny_model(tokenizer).save_pretrained(tmp_path / "model")
    models = []

    def model_of(language):
        models.append(language)
        return str(tmp_path / "model")

    monkeypatch.setattr(hosting, "default_model", model_of)
    monkeypatch.setattr(quoter.quote_bank, "load_quote_bank", lambda language: QUOTES[language])
    result, calls = served("--lang", "zh", "--lang", "zh-classical")
    assert result.exit_code == 0, result.output
    with TestClient(calls["app"]) as client:
        health = client.get("/health").json()
        assert health["languages"] == ["zh", "zh-classical"]
        assert [b["quotes"] for b in health["bundles"]] == [2, 2]
        body = client.post("/recommend", json={"left": "学而时习之乎"}).json()
        assert body["lang"] == "zh-classical" and body["lang_guessed"] is True
        assert {r["quote"] for r in body["results"]} == {q.text for q in QUOTES[Language.ZH_CLASSICAL]}
    assert models.count(Language.ZH) >= 1
