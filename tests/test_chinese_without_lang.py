"""Chinese text sent without `lang` while both Chinese banks are hosted: never refused, ranked in both banks and
answered in one list, each quote by its standing in its own bank (chinese_merge), for dense and hybrid
bundles alike; `lang` named still means that bank alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from quoter.bundle import QuoteRecord
from quoter.datasets import Sample
from quoter.fusion import Fusion
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.chinese_merge import merge_banks, standing
from quoter.serving.http.app import create_app
from quoter.serving.http.language_choice import choose_hosted_banks
from quoter.serving.live.live_quotes import ScoredQuote
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle

ZH, CLASSICAL = Language.ZH, Language.ZH_CLASSICAL
BOTH = ["zh", "zh-classical"]
# Two banks of five quotes, in characters of the tiny vocabulary that the other bank's quotes do not use.
MODERN_QUOTES = ["我们喜欢学习", "我们学习", "喜欢学习", "我们喜欢", "学习我们"]
CLASSICAL_QUOTES = ["不亦说乎", "时不说之", "而时之", "亦不乎", "之乎而"]
# Hybrid banks: each knows a context of two of its quotes, with weights of very different sizes, so that
# their fused scores are on different scales.
MODERN_KNOWN = [("我们喜欢", 0), ("学习", 1)]
CLASSICAL_KNOWN = [("说乎", 0), ("而时", 1)]
MODERN_FUSION = Fusion(weights={"dense": 1.0, "crm": 2.0})
CLASSICAL_FUSION = Fusion(weights={"dense": 1.0, "bm25": 3.0, "crm": 5.0, "knn": 1.0})


def bank(
    folder: Path, language: Language, quotes: list[str], fusion: Fusion | None = None, known: list = ()
) -> Recommender:
    """A recommender of tiny encoders over `quotes`; hybrid when a fusion is given, knowing `known` contexts."""
    bundle = tiny_bundle(folder, language)
    bundle = replace(bundle, quotes=[QuoteRecord(q) for q in quotes], quote_vectors=bundle.quote_encoder.encode(quotes))
    if fusion is not None:
        bundle.fusion = fusion
        bundle.known_contexts = [Sample(left, quote_id, "", n) for n, (left, quote_id) in enumerate(known)]
        bundle.known_vectors = bundle.context_encoder.encode([Query(left) for left, _ in known])
    return Recommender(bundle)


def client_of(recommenders: list[Recommender]) -> TestClient:
    return TestClient(create_app(recommenders), base_url=LOOPBACK_URL)


@pytest.fixture(scope="module", params=["dense", "hybrid"])
def client(request, tmp_path_factory):
    """English and both Chinese banks, dense or hybrid."""
    folder = tmp_path_factory.mktemp(request.param)
    modern_fusion, classical_fusion = (MODERN_FUSION, CLASSICAL_FUSION) if request.param == "hybrid" else (None, None)
    recommenders = [
        Recommender(tiny_bundle(folder / "en", Language.EN)),
        bank(folder / "zh", ZH, MODERN_QUOTES, modern_fusion, MODERN_KNOWN),
        bank(folder / "zh-classical", CLASSICAL, CLASSICAL_QUOTES, classical_fusion, CLASSICAL_KNOWN),
    ]
    with client_of(recommenders) as client:
        yield client


def recommend(client: TestClient, **body) -> dict:
    response = client.post("/recommend", json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    "text",
    [
        "我喜欢学习",  # no function word: this was a 422 once, then modern
        "学而时习之乎",  # classical function words: this went to the classical bank alone
        "我们的学习",  # modern ones: the modern bank alone
        "离家多年，每到中秋看着窗外的月亮，我总会想起",  # modern text that wants a classical line
        "之",
    ],
)
def test_chinese_without_lang_is_answered_from_both_banks(client, text):
    for body in ({"left": text}, {"left": "", "right": text}):
        answer = recommend(client, **body)
        assert answer["langs"] == BOTH and answer["lang_guessed"] is True
        assert answer["lang"] == answer["results"][0]["lang"]


def test_the_answer_is_one_list_of_both_banks_by_standing(client):
    context = {"left": "我们喜欢", "right": "之乎"}
    merged = recommend(client, **context, k=100)["results"]
    assert {r["lang"] for r in merged} == set(BOTH) and len(merged) == len(MODERN_QUOTES) + len(CLASSICAL_QUOTES)
    scores = [r["score"] for r in merged]
    assert scores == sorted(scores, reverse=True)
    for lang in BOTH:
        # Each bank's quotes keep the bank's own order (its fused order, for a hybrid bank), and a quote's score
        # is the z-score of its own score over its bank.
        alone = recommend(client, **context, lang=lang, k=100)["results"]
        from_bank = [r for r in merged if r["lang"] == lang]
        assert [r["id"] for r in from_bank] == [r["id"] for r in alone]
        own = np.array([r["score"] for r in alone])
        expected = (own - own.mean()) / own.std()
        np.testing.assert_allclose([r["score"] for r in from_bank], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose([r["probability"] for r in from_bank], [r["probability"] for r in alone], rtol=1e-6)
    top = recommend(client, **context, k=3)["results"]
    assert [(r["lang"], r["id"]) for r in top] == [(r["lang"], r["id"]) for r in merged[:3]]


def test_a_named_language_is_that_bank_alone(client):
    for lang in BOTH:
        answer = recommend(client, left="我们喜欢之乎", lang=lang, k=100)
        assert answer["lang"] == lang and answer["langs"] == [lang] and answer["lang_guessed"] is False
        assert {r["lang"] for r in answer["results"]} == {lang}


def test_a_batch_answers_each_request_as_recommend_does(client):
    requests = [
        {"left": "the cat"},
        {"left": "我们喜欢", "k": 3},
        {"left": "我们喜欢", "lang": "zh", "k": 2},
        {"left": "说乎", "right": "而时", "lang": "zh-classical"},
        {"left": "", "right": "不亦说乎", "k": 4},
    ]
    response = client.post("/recommend/batch", json={"requests": requests})
    assert response.status_code == 200
    answers = response.json()["responses"]
    assert [a["langs"] for a in answers] == [["en"], BOTH, ["zh"], ["zh-classical"], BOTH]
    for request, answer in zip(requests, answers):
        single = recommend(client, **request)["results"]
        assert [(r["lang"], r["id"]) for r in answer["results"]] == [(r["lang"], r["id"]) for r in single]
        np.testing.assert_allclose([r["score"] for r in answer["results"]], [r["score"] for r in single], rtol=1e-5)


def test_hybrid_banks_of_different_weights_each_answer_first_where_their_quote_fits(tmp_path):
    # The banks' fused scores are sums of z-scores under weights that add up to 3 and to 10.
    modern = bank(tmp_path / "zh", ZH, MODERN_QUOTES, MODERN_FUSION, MODERN_KNOWN)
    classical = bank(tmp_path / "zh-classical", CLASSICAL, CLASSICAL_QUOTES, CLASSICAL_FUSION, CLASSICAL_KNOWN)
    with client_of([modern, classical]) as client:
        for text, lang, quote in [("我们喜欢", "zh", MODERN_QUOTES[0]), ("说乎", "zh-classical", CLASSICAL_QUOTES[0])]:
            first = recommend(client, left=text)["results"][0]
            assert (first["lang"], first["quote"]) == (lang, quote)


def test_with_one_chinese_bank_it_answers_alone_as_before(tmp_path):
    english = Recommender(tiny_bundle(tmp_path / "en", Language.EN))
    with client_of([english, bank(tmp_path / "zh", ZH, MODERN_QUOTES)]) as client:
        answer = recommend(client, left="我们喜欢", k=3)
        named = recommend(client, left="我们喜欢", lang="zh", k=3)
    assert answer["langs"] == ["zh"] and answer["lang"] == "zh" and answer["lang_guessed"] is True
    assert answer["results"] == named["results"]  # the bank's own scores, not standings


def test_the_openapi_document_says_chinese_is_ranked_in_both_banks(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "ranked in both Chinese banks" in schemas["RecommendRequest"]["description"]
    assert "lang" in schemas["RecommendationOut"]["required"] and "langs" in schemas["RecommendResponse"]["required"]


def test_choosing_banks():
    hosted = list(Language)
    assert choose_hosted_banks(None, hosted, ["学而时习之乎"]) == ((ZH, CLASSICAL), True)
    assert choose_hosted_banks(None, [Language.EN, CLASSICAL], ["我们的"]) == ((CLASSICAL,), True)
    assert choose_hosted_banks(CLASSICAL, hosted, ["我们的"]) == ((CLASSICAL,), False)
    assert choose_hosted_banks(None, hosted, ["the cat 之"]) == ((Language.EN,), True)


def scored(scores: list[float]) -> list[ScoredQuote]:
    return [ScoredQuote(i, QuoteRecord(f"q{i}"), s, 0.1) for i, s in enumerate(scores)]


def test_merge_compares_standings_not_scores():
    # Bank A's scores are a hundred times bank B's; B's best stands out more from the rest of its bank.
    merged = merge_banks({ZH: scored([100.0, 90.0, 80.0]), CLASSICAL: scored([1.0, 0.2, 0.1])}, k=3)
    assert [(q.lang, q.found.id) for q in merged] == [(CLASSICAL, 0), (ZH, 0), (ZH, 1)]
    np.testing.assert_allclose([q.found.score for q in merged], [1.4069, 1.2247, 0.0], atol=1e-4)
    # Ties go to the bank named first; an empty bank adds nothing; alike scores stand at 0.
    tied = merge_banks({ZH: scored([2.0, 1.0]), CLASSICAL: scored([5.0, 3.0]), Language.EN: []}, k=4)
    assert [q.lang for q in tied] == [ZH, CLASSICAL, ZH, CLASSICAL]
    np.testing.assert_array_equal(standing(np.array([[3.0, 3.0], [1.0, 2.0]])), [[0.0, 0.0], [-1.0, 1.0]])
