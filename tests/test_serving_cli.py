"""`quoter serve` / serve.py: options, hosted bundles and the built-in default, without opening a port."""

import pytest
from fastapi.testclient import TestClient
from transformers import BertModel, BertTokenizerFast

import quoter.cli.serve_commands as serve_commands
import quoter.default_bundles as default_bundles
from quoter.cli.serve_commands import Hosted, hosted_app
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.hosting import parse_language_spec
from quoter.serving.settings import ServeConfig
from tests.serving_fixtures import LOOPBACK_URL, QUOTES, tiny_bundle
from tests.training_fixtures import write_model


def test_serve_hosts_the_given_bundles_with_an_api_key(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    tiny_bundle(tmp_path / "zh", Language.ZH).save(tmp_path / "bundle-zh")
    result, calls = served(
        "--bundle", f"en={tmp_path / 'bundle-en'}", "--bundle", f"zh={tmp_path / 'bundle-zh'}", "--port", 9123,
        env={"QUOTER_API_KEY": "k"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert calls["host"] == "127.0.0.1" and calls["port"] == 9123
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.get("/health").json()["languages"] == ["en", "zh"]
        assert client.post("/quotes", json={"quote": "the mat", "lang": "en"}).status_code == 401
        added = client.post("/quotes", json={"quote": "the mat", "lang": "en"}, headers={"X-API-Key": "k"})
        assert added.status_code == 201
    # The change was saved into the bundle folder: a new server lists the quote under the same id.
    result, calls = served("--bundle", f"en={tmp_path / 'bundle-en'}")
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        listed = client.get("/quotes", params={"q": "the mat"}).json()["quotes"]
        assert {q["quote"]: q["id"] for q in listed}["the mat"] == added.json()["id"]


def test_a_second_server_on_the_same_state_folder_is_refused_at_its_start(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    options = ("--bundle", f"en={tmp_path / 'bundle-en'}", "--state", tmp_path / "state")
    first, calls = served(*options)
    assert first.exit_code == 0, first.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        second, _ = served(*options, stop_earlier=False)
        assert second.exit_code != 0 and isinstance(second.exception, QuoterError)
        message = str(second.exception)
        assert f"{tmp_path / 'state' / 'en' / 'quote_index'}: another server" in message and "--state" in message
        # The first one goes on taking changes.
        assert client.post("/quotes", json={"quote": "a line of the first server", "lang": "en"}).status_code == 201
    # Once the first has stopped, a server starts there again and finds the change.
    third, calls = served(*options)
    assert third.exit_code == 0, third.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.get("/quotes", params={"q": "a line of the first server"}).json()["total"] == 1


def test_serve_refuses_bad_bundle_options(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    result, _ = served("--bundle", f"zh={tmp_path / 'bundle-en'}")
    assert "the bundle's language is en, not zh" in str(result.exception)
    result, _ = served("--bundle", f"en={tmp_path / 'bundle-en'}", "--lang", "en")
    assert "--lang chooses among the built-in bundles" in str(result.exception)
    with pytest.raises(QuoterError, match="expects LANG=PATH"):
        parse_language_spec("models/en")
    with pytest.raises(QuoterError, match="unknown language 'fr'"):
        parse_language_spec("fr=models/fr")
    assert parse_language_spec("zh-classical=a/b") == (Language.ZH_CLASSICAL, tmp_path.__class__("a/b"))


def test_without_bundles_the_quote_bank_is_served_zero_shot(served, tmp_path, monkeypatch):
    # Weights drawn wide, as for training's tests: with the tiny model's own, all scores are nearly alike.
    folder = write_model(tmp_path / "model")
    models = []

    def model_of(language):
        models.append(language)
        return str(folder)

    monkeypatch.setattr(default_bundles, "default_model", model_of)
    monkeypatch.setattr(default_bundles, "load_quote_bank", lambda language: QUOTES[language])
    result, calls = served("--lang", "zh", "--lang", "zh-classical", "--runtime", "torch")
    assert result.exit_code == 0, result.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        health = client.get("/health").json()
        assert health["languages"] == ["zh", "zh-classical"]
        assert [b["quotes"] for b in health["bundles"]] == [2, 2]
        body = client.post("/recommend", json={"left": "学而时习之乎", "lang": "zh-classical"}).json()
        assert body["lang"] == "zh-classical" and body["lang_guessed"] is False
        served_scores = [(r["quote"], r["score"]) for r in body["results"]]
    # The classical bank scored by the default model as it reads a context and a quote (native pooling: the
    # paper's, for a plain BERT; glosses on: the quote's source is read too), best first.
    model, tokenizer = BertModel.from_pretrained(folder), BertTokenizerFast.from_pretrained(folder)
    contexts = ContextEncoder(model, tokenizer, ContextEncoderConfig())
    bank = QUOTES[Language.ZH_CLASSICAL]
    vectors = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(gloss=True)).encode_records(bank)
    scores = contexts.encode([Query("学而时习之乎", "")])[0] @ vectors.T
    expected = sorted(zip([q.text for q in bank], scores.tolist()), key=lambda pair: -pair[1])
    assert [quote for quote, _ in served_scores] == [quote for quote, _ in expected]
    assert [score for _, score in served_scores] == pytest.approx([score for _, score in expected], rel=1e-5)
    assert set(models) == {Language.ZH, Language.ZH_CLASSICAL}


@pytest.fixture
def english_bundle(tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    return f"en={tmp_path / 'bundle-en'}"


def test_the_api_key_can_come_from_a_file(served, english_bundle, tmp_path):
    key_file = tmp_path / "api-key"
    key_file.write_text("from-a-file\n", encoding="utf-8")
    for args, env in [(["--api-key-file", key_file], None), ([], {"QUOTER_API_KEY_FILE": str(key_file)})]:
        result, calls = served("--bundle", english_bundle, *args, env=env)
        assert result.exit_code == 0, result.output
        with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
            assert client.delete("/quotes/99").status_code == 401
            assert client.delete("/quotes/99", headers={"X-API-Key": "from-a-file"}).status_code == 404  # let in
    result, _ = served("--api-key-file", key_file, env={"QUOTER_API_KEY": "another"})
    assert "give the API key once" in str(result.exception)
    key_file.write_text("\n", encoding="utf-8")
    result, _ = served("--api-key-file", key_file)
    assert "the API key file is empty" in str(result.exception)
    result, _ = served("--api-key-file", tmp_path / "missing")
    assert "cannot read the API key file" in str(result.exception)


OPEN_ON_LOOPBACK = "no API key: anyone on this machine can add and remove quotes (set QUOTER_API_KEY to require a key)"
CLOSED_BEYOND_LOOPBACK = "no API key: quote changes are refused (403), as the server listens beyond loopback on"


def test_every_interface_without_a_key_refuses_changes_and_answers_any_host(served, english_bundle):
    result, calls = served("--bundle", english_bundle, "--host", "0.0.0.0")
    assert result.exit_code == 0, result.output
    assert f"{CLOSED_BEYOND_LOOPBACK} 0.0.0.0; set QUOTER_API_KEY or QUOTER_API_KEY_FILE" in result.stderr
    with TestClient(calls["app"], base_url="http://quoter.example") as client:
        assert client.get("/health").status_code == 200
        # Refused before the body is looked at: this one is too large and not JSON (was 201 from anyone).
        added = client.post("/quotes", content=b"x" * 3_000_000, headers={"Content-Type": "text/plain"})
        removed = client.delete("/quotes/0")
        document = client.get("/openapi.json").json()
    message = "this server takes quote changes only with an API key when it listens beyond loopback, and it has none"
    for response in (added, removed):
        assert response.status_code == 403
        assert response.json() == {"detail": [{"loc": [], "msg": message, "type": "writes_closed"}]}
    assert message in document["info"]["description"]
    assert message in document["paths"]["/quotes"]["post"]["responses"]["403"]["description"]
    assert "401" not in document["paths"]["/quotes/{quote_id}"]["delete"]["responses"]
    result, calls = served("--bundle", english_bundle, "--host", "0.0.0.0", env={"QUOTER_API_KEY": "k"})
    assert result.exit_code == 0 and "no API key" not in result.stderr
    with TestClient(calls["app"], base_url="http://quoter.example") as client:
        assert client.post("/quotes", json={"quote": "a new quote"}, headers={"X-API-Key": "k"}).status_code == 201


def test_loopback_without_a_key_takes_changes_and_says_so(served, english_bundle):
    result, calls = served("--bundle", english_bundle)
    assert result.exit_code == 0 and OPEN_ON_LOOPBACK in result.stderr
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "a new quote"}).status_code == 201
        assert "description" not in client.get("/openapi.json").json()["info"]


def test_a_ray_replica_refuses_changes_beyond_loopback_without_a_key(english_bundle, monkeypatch):
    # hosted_app builds the app each Ray Serve replica serves: the same decision as one process.
    monkeypatch.setattr(serve_commands, "set_threads", lambda threads: None)
    hosted = Hosted([english_bundle], [], [Language.EN], None, None)
    for host, status in (("0.0.0.0", 403), ("127.0.0.1", 201)):
        settings = ServeConfig(host=host, runtime=ContextRuntime.TORCH)
        with TestClient(hosted_app(hosted, None, settings), base_url=LOOPBACK_URL) as client:
            assert client.post("/quotes", json={"quote": f"a quote from {host}"}).status_code == status


def test_limit_options_reach_the_server(served, english_bundle):
    result, calls = served("--bundle", english_bundle)
    assert calls["options"]["timeout_keep_alive"] == 75
    result, calls = served(
        "--bundle", english_bundle, "--allowed-host", "quoter.example", "--max-body-bytes", 100, "--keep-alive", 30
    )
    assert result.exit_code == 0, result.output
    assert calls["options"]["timeout_keep_alive"] == 30
    with TestClient(calls["app"], base_url="http://quoter.example") as client:
        assert client.post("/recommend", json={"left": "the cat " * 20}).status_code == 413
        assert client.post("/recommend", json={"left": "the cat"}).status_code == 200
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.get("/health").status_code == 400  # --allowed-host replaces the loopback names
    result, _ = served("--bundle", english_bundle, "--max-queue", 10)  # less than one full batch request
    assert str(result.exception) == "limits.max_queued_contexts: must be at least 64, got 10"
