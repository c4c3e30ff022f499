"""The HTTP API through the real ASGI app: every endpoint, and a clear 4xx for every kind of bad input."""

import asyncio
from dataclasses import replace

import httpx
import pytest
from fastapi.testclient import TestClient

import quoter.serving.http.app as app_module
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.http.language_choice import LanguageChoiceError, choose_hosted_banks
from quoter.serving.http.schemas import MAX_BATCH, MAX_CONTEXT_CHARS, MAX_K
from quoter.serving.micro_batching import BatchingConfig
from quoter.serving.recommender import BUNDLE_AS_IS, Recommender
from quoter.serving.settings import RecommenderConfig
from tests.serving_fixtures import LOOPBACK_URL, QUOTES, tiny_bundle

KEY = "s3cret"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundles")
    return {language: tiny_bundle(folder / language.value, language) for language in Language}


def make_app(bundles, languages=tuple(Language), api_key=KEY, batching=BatchingConfig()):
    config = replace(BUNDLE_AS_IS, batching=batching)
    return create_app([Recommender(bundles[lang], config) for lang in languages], AppConfig(api_key=api_key))


@pytest.fixture
def client(bundles):
    with TestClient(make_app(bundles), base_url=LOOPBACK_URL) as client:
        yield client


def test_recommend_ranks_the_whole_quote_set(client, bundles):
    response = client.post("/recommend", json={"left": "the cat", "right": "home", "lang": "en", "k": 3})
    assert response.status_code == 200
    body = response.json()
    assert body["lang"] == "en" and body["lang_guessed"] is False and len(body["results"]) == 3
    assert body["langs"] == ["en"] and {r["lang"] for r in body["results"]} == {"en"}
    # The same ranking as the bundle's own ranker, probabilities a softmax over all five quotes.
    scores = bundle_ranker(bundles[Language.EN]).score([Query("the cat", "home")])[0]
    best = scores.argsort()[::-1][:3]
    assert [r["id"] for r in body["results"]] == best.tolist()
    assert [r["score"] for r in body["results"]] == pytest.approx(scores[best].tolist(), rel=1e-4)
    softmax = (lambda e: e / e.sum())(__import__("numpy").exp(scores - scores.max()))
    assert [r["probability"] for r in body["results"]] == pytest.approx(softmax[best].tolist(), rel=1e-4)
    first = body["results"][0]
    assert first["quote"] == QUOTES[Language.EN][first["id"]].text
    assert first["source"] == QUOTES[Language.EN][first["id"]].source


def test_left_only_and_default_k(client):
    body = client.post("/recommend", json={"left": "the dog", "lang": "en"}).json()
    assert len(body["results"]) == 5  # k defaults to 10, capped by the five quotes


@pytest.mark.parametrize(
    ("text", "hosted", "expected"),
    [
        ("the cat sat", tuple(Language), ["en"]),
        ("我们喜欢", (Language.EN, Language.ZH), ["zh"]),
        ("学而时习之", (Language.EN, Language.ZH_CLASSICAL), ["zh-classical"]),
        # Chinese text goes to both Chinese banks, whatever its function words say.
        ("我们的学习", tuple(Language), ["zh", "zh-classical"]),
        ("学而时习之乎", tuple(Language), ["zh", "zh-classical"]),
    ],
)
def test_an_unnamed_language_is_guessed_from_the_script(bundles, text, hosted, expected):
    with TestClient(make_app(bundles, hosted), base_url=LOOPBACK_URL) as client:
        body = client.post("/recommend", json={"left": text}).json()
    assert body["langs"] == expected and body["lang_guessed"] is True
    assert body["lang"] == body["results"][0]["lang"]


def test_a_single_bundle_needs_no_guess(bundles):
    with TestClient(make_app(bundles, (Language.ZH,)), base_url=LOOPBACK_URL) as client:
        body = client.post("/recommend", json={"left": "the cat"}).json()
    assert body["lang"] == "zh" and body["langs"] == ["zh"] and body["lang_guessed"] is False


def test_a_context_without_a_letter_of_a_hosted_script_is_422_naming_lang(client, bundles):
    for left in ("123 !", "…"):
        response = client.post("/recommend", json={"left": left})
        [error] = response.json()["detail"]
        assert response.status_code == 422 and error["loc"] == ["body", "lang"] and error["type"] == "language"
        assert "cannot tell the language" in error["msg"]
    batch = client.post("/recommend/batch", json={"requests": [{"left": "the cat"}, {"left": "", "right": "?"}]})
    assert batch.status_code == 422 and [e["loc"] for e in batch.json()["detail"]] == [["body", "requests", 1, "lang"]]
    with TestClient(make_app(bundles, (Language.ZH, Language.ZH_CLASSICAL)), base_url=LOOPBACK_URL) as other:
        # English is not hosted: Latin letters place no text, Chinese characters do.
        response = other.post("/recommend", json={"left": "the cat"})
        assert response.status_code == 422 and "cannot tell the language" in response.json()["detail"][0]["msg"]
        assert other.post("/recommend", json={"left": "the cat 之乎"}).json()["langs"] == ["zh", "zh-classical"]
        response = other.post("/recommend", json={"left": "the cat", "lang": "en"})
        assert response.status_code == 422 and "'en' is not hosted" in response.json()["detail"][0]["msg"]
    assert choose_hosted_banks(None, [Language.ZH], ["the cat"]) == ((Language.ZH,), False)
    with pytest.raises(LanguageChoiceError, match="cannot tell the language"):
        choose_hosted_banks(None, [Language.EN, Language.ZH], ["...", "42"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"right": "home"}, "left"),  # missing field
        ({"left": 5}, "left"),  # wrong type
        ({"left": "a", "k": "many"}, "k"),
        ({"left": "a" * (MAX_CONTEXT_CHARS + 1)}, "left"),  # too long
        ({"left": "a", "right": "a" * (MAX_CONTEXT_CHARS + 1)}, "right"),
        ({"left": "a", "k": MAX_K + 1}, "k"),  # k too big
        ({"left": "a", "k": 0}, "k"),
        ({"left": "a", "lang": "fr"}, "lang"),  # unknown language
    ],
)
def test_bad_requests_name_the_field(client, body, field):
    response = client.post("/recommend", json=body)
    assert response.status_code == 422
    assert any(error["loc"][-1] == field for error in response.json()["detail"])


def test_malformed_json_is_a_4xx_and_the_server_goes_on(client):
    for content in (b'{"left": "the cat"', b"not json", b"[1, 2]", "\udcff".encode("utf-8", "surrogatepass")):
        response = client.post("/recommend", content=content, headers={"Content-Type": "application/json"})
        assert 400 <= response.status_code < 500
    assert client.post("/recommend", json={"left": "the cat", "lang": "en"}).status_code == 200


def test_batch_answers_in_order_and_checks_its_size(client):
    requests = [{"left": "the cat", "lang": "en", "k": 2}, {"left": "我们的", "k": 1}, {"left": "the dog", "k": 4}]
    response = client.post("/recommend/batch", json={"requests": requests})
    assert response.status_code == 200
    answers = response.json()["responses"]
    assert [a["langs"] for a in answers] == [["en"], ["zh", "zh-classical"], ["en"]]
    assert [len(a["results"]) for a in answers] == [2, 1, 4]
    single = client.post("/recommend", json=requests[2]).json()
    assert [r["id"] for r in answers[2]["results"]] == [r["id"] for r in single["results"]]
    assert [r["score"] for r in answers[2]["results"]] == pytest.approx([r["score"] for r in single["results"]], 1e-4)
    too_many = {"requests": [{"left": "a", "lang": "en"}] * (MAX_BATCH + 1)}
    assert client.post("/recommend/batch", json=too_many).status_code == 422
    assert client.post("/recommend/batch", json={"requests": []}).status_code == 422
    unhosted = {"requests": [{"left": "a", "lang": "en"}, {"left": "?"}]}
    assert client.post("/recommend/batch", json=unhosted).status_code == 422


def test_health_lists_the_hosted_languages(client):
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["languages"] == ["en", "zh", "zh-classical"]
    assert body["bundles"][0] == {
        "lang": "en",
        "quotes": 5,
        "model": "tiny",
        "index": "exact",
        "int8": False,
        "runtime": "torch",
    }
    assert client.get("/openapi.json").json()["paths"].keys() >= {"/recommend", "/quotes", "/health"}
    assert client.get("/docs").status_code == 200


def test_browse_quotes(client):
    body = client.get("/quotes", params={"lang": "en", "offset": 1, "limit": 2}).json()
    assert body["total"] == 5 and [q["id"] for q in body["quotes"]] == [1, 2]
    body = client.get("/quotes", params={"lang": "en", "q": "DOG"}).json()
    assert body["total"] == 3 and [q["quote"] for q in body["quotes"]][0] == "the dog ran home"
    assert client.get("/quotes", params={"lang": "en", "q": "farm"}).json()["total"] == 1  # sources too
    assert client.get("/quotes").status_code == 422  # several languages hosted: name one
    assert client.get("/quotes", params={"lang": "en", "limit": 1000}).status_code == 422
    assert client.get("/quotes", params={"lang": "en", "offset": -1}).status_code == 422


def test_adding_and_removing_quotes_changes_results_at_once(client, bundles):
    headers = {"X-API-Key": KEY}
    context = {"left": "the cat", "right": "home", "lang": "en", "k": 10}
    before = client.post("/recommend", json=context).json()["results"]
    added = client.post("/quotes", json={"quote": "the happy cat ran", "source": "Me", "lang": "en"}, headers=headers)
    assert added.status_code == 201 and added.json() == {
        "id": 5,
        "quote": "the happy cat ran",
        "source": "Me",
        "lang": "en",
        "created": True,
    }
    again = client.post("/quotes", json={"quote": " the happy cat ran", "lang": "en"}, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == 5 and again.json()["created"] is False
    after = client.post("/recommend", json=context).json()["results"]
    assert len(after) == len(before) + 1 and 5 in [r["id"] for r in after]
    assert sum(r["probability"] for r in after) == pytest.approx(1.0)

    best = before[0]["id"]
    removed = client.delete(f"/quotes/{best}", params={"lang": "en"}, headers=headers)
    assert removed.status_code == 200 and removed.json()["id"] == best
    now = client.post("/recommend", json=context).json()["results"]
    assert best not in [r["id"] for r in now] and len(now) == len(before)
    assert client.delete(f"/quotes/{best}", params={"lang": "en"}, headers=headers).status_code == 404
    assert client.delete("/quotes/abc", params={"lang": "en"}, headers=headers).status_code == 422
    assert client.get("/quotes", params={"lang": "en"}).json()["total"] == 5


def test_adding_a_listed_quote_with_another_source_or_gloss_is_409(client):
    headers = {"X-API-Key": KEY}
    listed = {"quote": "the dog ran home", "source": "Farm", "lang": "en"}  # id 1
    for same in (listed, {**listed, "source": ""}, {"quote": " the dog ran home ", "lang": "en"}):
        response = client.post("/quotes", json=same, headers=headers)
        assert response.status_code == 200 and response.json()["id"] == 1 and response.json()["source"] == "Farm"
    for field, value in (("source", "Elsewhere " * 20), ("gloss", "running home")):
        response = client.post("/quotes", json={**listed, field: value}, headers=headers)
        assert response.status_code == 409 and response.json() == {
            "detail": [
                {
                    "loc": ["body", field],
                    "msg": f"the quote is already listed, as id 1, with another {field}; remove it first to list it "
                    f"with this {field}",
                    "type": "listed_differently",
                }
            ]
        }
    listed_now = client.get("/quotes", params={"lang": "en", "q": "the dog ran"}).json()["quotes"]
    assert listed_now == [{"id": 1, "quote": "the dog ran home", "source": "Farm", "examples": 0}]


@pytest.mark.parametrize(
    "quote", ["\x00", "\x00\x01\x7f", "\u200b\u200c\u200d", " \u2060\ufeff ", "\u0301\u0302", "\t\u00ad"]
)
def test_quotes_that_show_nothing_are_refused_naming_the_field(client, quote):
    response = client.post("/quotes", json={"quote": quote, "lang": "en"}, headers={"X-API-Key": KEY})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "quote"] and "no letter, number, punctuation or symbol" in error["msg"]
    assert client.get("/quotes", params={"lang": "en"}).json()["total"] == 5


def test_an_unknown_quote_id_is_404_without_echoing_it(client):
    headers = {"X-API-Key": KEY}
    for quote_id in ("9" * 40, "-7", "9" * 5000):
        response = client.delete(f"/quotes/{quote_id}", params={"lang": "en"}, headers=headers)
        assert response.status_code in (404, 422) and "999" not in response.text and "-7" not in response.text
        assert response.json()["detail"][0]["loc"] == ["path", "quote_id"]


def test_a_change_that_cannot_be_saved_is_503_not_made_and_names_no_server_path(bundles, tmp_path):
    blocked = tmp_path / "en"
    blocked.write_text("a file where the state folder should be", encoding="utf-8")
    recommender = Recommender(bundles[Language.EN], BUNDLE_AS_IS, state=blocked)
    with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client:
        response = client.post("/quotes", json={"quote": "a line that cannot be kept"})
        assert response.status_code == 503
        [error] = response.json()["detail"]
        assert error["type"] == "not_saved" and "not made" in error["msg"] and str(tmp_path) not in error["msg"]
        assert client.get("/quotes", params={"q": "cannot be kept"}).json()["total"] == 0
        assert client.delete("/quotes/0").status_code == 503
        assert client.get("/quotes", params={"q": "the cat sat"}).json()["total"] == 1


def test_changing_quotes_needs_the_api_key(client):
    new = {"quote": "a dog sat", "lang": "en"}
    assert client.post("/quotes", json=new).status_code == 401
    assert client.post("/quotes", json=new, headers={"X-API-Key": "wrong"}).status_code == 403
    assert client.delete("/quotes/0", params={"lang": "en"}).status_code == 401
    assert client.delete("/quotes/0", params={"lang": "en"}, headers={"X-API-Key": "nope"}).status_code == 403
    assert client.get("/quotes", params={"lang": "en"}).json()["total"] == 5  # nothing changed
    headers = {"X-API-Key": KEY}
    assert client.post("/quotes", json={"quote": "a dog sat"}, headers=headers).status_code == 422  # which language?
    assert client.post("/quotes", json={"quote": "", "lang": "en"}, headers=headers).status_code == 422
    assert client.post("/quotes", json={"quote": "   ", "lang": "en"}, headers=headers).status_code == 422


def test_without_a_configured_key_changes_are_open(bundles):
    with TestClient(make_app(bundles, (Language.EN,), api_key=None), base_url=LOOPBACK_URL) as client:
        assert client.post("/quotes", json={"quote": "a dog sat"}).status_code == 201


def test_the_demo_page_is_served_or_clearly_missing(client, tmp_path, monkeypatch):
    page = tmp_path / "index.html"
    page.write_text("<!doctype html><title>Quoter</title>", encoding="utf-8")
    monkeypatch.setattr(app_module, "DEMO_PAGE", page)
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert "<title>Quoter</title>" in response.text
    monkeypatch.setattr(app_module, "DEMO_PAGE", tmp_path / "missing.html")
    response = client.get("/")
    assert response.status_code == 404 and response.json()["detail"] == [
        {"loc": [], "msg": "the demo page is not installed", "type": "not_found"}
    ]


def test_two_bundles_of_one_language_are_refused(bundles):
    with pytest.raises(Exception, match="two bundles for language 'en'"):
        make_app(bundles, (Language.EN, Language.EN))


def test_concurrent_requests_share_encoder_calls(bundles):
    recommender = Recommender(bundles[Language.EN], replace(BUNDLE_AS_IS, batching=BatchingConfig(8, max_wait_ms=50)))
    app = create_app([recommender])
    contexts = [{"left": f"the cat {'a ' * i}", "right": "home", "k": 2} for i in range(16)]

    async def drive():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=LOOPBACK_URL) as client:
            responses = await asyncio.gather(*(client.post("/recommend", json=c) for c in contexts))
            single = await client.post("/recommend", json=contexts[5])
        return responses, single

    responses, single = asyncio.run(drive())
    assert all(r.status_code == 200 for r in responses)
    # Batched with others or alone, a context gets the same answer.
    batched, alone = responses[5].json()["results"], single.json()["results"]
    assert [r["id"] for r in batched] == [r["id"] for r in alone]
    assert [r["score"] for r in batched] == pytest.approx([r["score"] for r in alone], rel=1e-4)
    sizes = recommender.batch_sizes
    requests, batches = sum(size * count for size, count in sizes.items()), sum(sizes.values())
    assert requests == 17 and max(sizes) == 8 and batches <= 4, sizes


def test_int8_quantizes_only_the_context_encoder(bundles):
    bundle = bundles[Language.EN]
    plain, quantized = Recommender(bundle), Recommender(bundle, RecommenderConfig(int8=True))
    assert quantized.context_encoder is not bundle.context_encoder
    assert any("quantized" in type(module).__module__ for module in quantized.context_encoder.modules())
    queries = [Query("the cat", "home"), Query("a dog ran")]
    for want, got in zip(plain.recommend(queries, 3), quantized.recommend(queries, 3)):
        # The same 3 of the 5 quotes in the same order; the 3 scores spread over 0.006 and 0.017.
        assert [item.id for item in got] == [item.id for item in want]
        assert [item.score for item in got] == pytest.approx([item.score for item in want], abs=1e-3)
    with TestClient(create_app([quantized]), base_url=LOOPBACK_URL) as client:
        assert client.get("/health").json()["bundles"][0]["int8"] is True
