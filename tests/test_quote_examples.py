"""A quote added at run time with usage examples, contexts it is used in: a hybrid bundle learns from them as
it learned from its own quotes' (CRM and knn know the quote by them, its vector is pulled towards them), they
are saved with the quote, and a bundle that is not hybrid refuses them."""

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from quoter.bundle import Bundle, QuoteRecord
from quoter.datasets import Sample
from quoter.default_bundles import usage_vectors
from quoter.errors import InputError
from quoter.fusion import Fusion
from quoter.hybrid_bundle import ranker_over
from quoter.languages import Language
from quoter.quote_set import encode_quote_set
from quoter.ranking import Query
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.http.schemas import MAX_CONTEXT_CHARS, MAX_EXAMPLES
from quoter.serving.http.server_limits import ServerLimits
from quoter.serving.live.live_quotes import LIVE_FOLDER
from quoter.serving.live.quote_store import SNAPSHOT_FILE, QuoteStore, StoredQuotes, UsageExamples, log_name
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle

KNOWN = [Sample("my pet", 0, "purred", 1), Sample("the farm animal", 1, "barked at me", 2)]
# As in test_serving_hybrid: weights that let the planted evidence outweigh the tiny model's random scores.
FUSION = Fusion(weights={"dense": 1.0, "bm25": 3.0, "crm": 5.0, "knn": 1.0})
PULL = 1.0
QUOTE = QuoteRecord("all that glitters is not gold")
# No word of the quote: BM25 cannot find it from them, only what is learned from the examples can.
EXAMPLES = [Query("grandmother polished her ring and said", "to everyone"), Query("shiny coins", "are not wealth")]
REPEATED = EXAMPLES[0]  # a context that repeats one of the examples
EXAMPLES_JSON = [{"left": e.left, "right": e.right} for e in EXAMPLES]


@pytest.fixture
def hybrid(tmp_path) -> Bundle:
    """A tiny hybrid bundle whose quotes were pulled towards their examples (PULL > 0)."""
    bundle = tiny_bundle(tmp_path / "tok")
    bundle.fusion, bundle.known_contexts = FUSION, list(KNOWN)
    bundle.known_vectors = bundle.context_encoder.encode([Query(sample.left, sample.right) for sample in KNOWN])
    bundle.info = {**bundle.info, "usage_pull": PULL}
    return bundle


def first(recommender: Recommender, query: Query = REPEATED) -> int:
    """The id the recommender ranks first for the query."""
    return recommender.recommend([query], k=1)[0][0].id


def vector_of(recommender: Recommender, quote_id: int) -> np.ndarray:
    """The vector the live set holds for a quote: its scores for the unit vectors."""
    scored = recommender.quotes.score_all(np.eye(recommender.quotes.index.dim, dtype=np.float32))
    return scored.scores[:, list(scored.ids).index(quote_id)]


@pytest.mark.parametrize(
    ("weights", "pull"),
    [({"dense": 1.0, "crm": 5.0}, 0.0), ({"dense": 1.0, "knn": 5.0}, 0.0), ({"dense": 1.0}, PULL), (None, PULL)],
    ids=["crm", "knn", "pulled-vector", "all"],
)
def test_a_context_that_repeats_an_example_ranks_the_quote_first_through_each_signal(hybrid, weights, pull):
    bundle = replace(hybrid, fusion=Fusion(weights=weights) if weights else FUSION, info={"usage_pull": pull})
    without, with_examples = Recommender(bundle), Recommender(bundle)
    plain_id, _ = without.quotes.add(QUOTE)
    learned_id, _ = with_examples.quotes.add(QUOTE, EXAMPLES)
    assert first(without) != plain_id and first(with_examples) == learned_id
    # The vector moves exactly as the bank's quotes moved, towards the examples' context vectors.
    raw = encode_quote_set(bundle.quote_encoder, [QUOTE]).vectors
    samples = [Sample(e.left, 0, e.right, n) for n, e in enumerate(EXAMPLES, start=1)]
    expected = usage_vectors(raw, samples, bundle.context_encoder.encode(EXAMPLES), pull)[0]
    np.testing.assert_allclose(vector_of(with_examples, learned_id), expected, atol=1e-5)
    np.testing.assert_allclose(vector_of(without, plain_id), raw[0], atol=1e-5)
    assert pull == 0 or not np.allclose(expected, raw[0], atol=1e-3)


def test_without_examples_an_added_quote_is_ranked_as_by_the_bundle(hybrid):
    recommender = Recommender(hybrid)
    new_id, _ = recommender.quotes.add(QUOTE)
    queries = [REPEATED, Query("my pet", "purred"), Query("the cat sat", "")]
    raw = encode_quote_set(hybrid.quote_encoder, [QUOTE]).vectors
    expected = ranker_over(hybrid, [*hybrid.quotes, QUOTE], np.concatenate([hybrid.quote_vectors, raw])).score(queries)
    for row, results in zip(expected, recommender.recommend(queries, k=6)):
        assert [r.id for r in results] == list(np.argsort(-row, kind="stable"))
        np.testing.assert_allclose([r.score for r in results], np.sort(row)[::-1], atol=1e-4)
    assert recommender.quotes.example_count(new_id) == 0


def test_a_bundle_that_is_not_hybrid_refuses_examples_with_a_422(tmp_path):
    recommender = Recommender(tiny_bundle(tmp_path))
    with TestClient(create_app([recommender]), base_url=LOOPBACK_URL) as client:
        response = client.post("/quotes", json={"quote": QUOTE.text, "examples": EXAMPLES_JSON})
        [error] = response.json()["detail"]
        assert response.status_code == 422 and error["loc"] == ["body", "examples"]
        assert "does not learn from usage examples" in error["msg"] and "grandmother" not in response.text
        assert client.get("/quotes").json()["total"] == 5  # nothing added
        examples = client.get("/openapi.json").json()["components"]["schemas"]["QuoteIn"]["properties"]["examples"]
        assert examples["maxItems"] == 0
        assert client.post("/quotes", json={"quote": QUOTE.text, "examples": []}).status_code == 201


def test_re_adding_is_200_with_the_same_or_no_examples_and_409_with_others(hybrid):
    with TestClient(create_app([Recommender(hybrid)]), base_url=LOOPBACK_URL) as client:
        added = client.post("/quotes", json={"quote": QUOTE.text, "examples": EXAMPLES_JSON})
        assert added.status_code == 201 and added.json()["id"] == 5
        for same in (EXAMPLES_JSON[::-1], [], None):
            body = {"quote": QUOTE.text} if same is None else {"quote": QUOTE.text, "examples": same}
            response = client.post("/quotes", json=body)
            assert response.status_code == 200 and response.json()["id"] == 5
        # Other examples, fewer of them, or examples for a quote listed without any (the bundle's own quote 1).
        for quote, other in (
            (QUOTE.text, [{"left": "a new context"}]),
            (QUOTE.text, EXAMPLES_JSON[:1]),
            ("the dog ran home", EXAMPLES_JSON),
        ):
            response = client.post("/quotes", json={"quote": quote, "examples": other})
            [error] = response.json()["detail"]
            assert response.status_code == 409 and error["loc"] == ["body", "examples"]
            assert error["type"] == "listed_differently" and "with other examples; remove it first" in error["msg"]
        listed = {q["id"]: q["examples"] for q in client.get("/quotes").json()["quotes"]}
        assert listed == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 2}


@pytest.mark.parametrize(
    ("examples", "loc"),
    [
        ([{"left": "a context"}] * (MAX_EXAMPLES + 1), ["body", "examples"]),
        ([{"left": " \u200b", "right": "\u0301\t"}], ["body", "examples"]),  # shows nothing on either side
        ([{"left": "a", "right": "b" * (MAX_CONTEXT_CHARS + 1)}], ["body", "examples", 0, "right"]),
        ([{"left": 5}], ["body", "examples", 0, "left"]),
        ({"left": "a"}, ["body", "examples"]),
    ],
)
def test_bad_examples_are_a_422_naming_the_field(hybrid, examples, loc):
    with TestClient(create_app([Recommender(hybrid)]), base_url=LOOPBACK_URL) as client:
        response = client.post("/quotes", json={"quote": QUOTE.text, "examples": examples})
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc
        assert client.get("/quotes").json()["total"] == 5
        assert client.post("/quotes", json={"quote": QUOTE.text, "examples": [{"right": "!"}]}).status_code == 201


def test_examples_and_their_vectors_survive_restarts_and_compaction(hybrid, tmp_path):
    state = tmp_path / "state"
    recommender = Recommender(hybrid, state=state)
    new_id, _ = recommender.quotes.add(QUOTE, EXAMPLES)
    queries = [REPEATED, EXAMPLES[1], Query("my pet", "purred")]
    before = recommender.recommend(queries, k=6)
    recommender.quotes.close()  # the process ends: its lock on the saved set goes, so the next open may compact
    for _ in range(2):  # the first open compacts the log into a snapshot; the second reads that
        reopened = Recommender(hybrid, state=state)
        assert reopened.quotes.example_count(new_id) == 2 and first(reopened) == new_id
        for want, got in zip(before, reopened.recommend(queries, k=6)):
            assert [r.id for r in got] == [r.id for r in want]
            np.testing.assert_allclose([r.score for r in got], [r.score for r in want], atol=1e-5)
        reopened.quotes.close()
    assert (state / LIVE_FOLDER / SNAPSHOT_FILE).is_file() and not (state / LIVE_FOLDER / log_name(0)).exists()


def stored_base() -> StoredQuotes:
    """A base set of 20 quotes, large enough that two changes do not compact the log."""
    return StoredQuotes({i: QuoteRecord(f"q{i}") for i in range(20)}, np.zeros((20, 4), np.float32), 20)


def test_an_add_is_saved_whole_with_its_examples_or_not_at_all(tmp_path):
    folder = tmp_path / LIVE_FOLDER
    examples = UsageExamples((Query("left", ""), Query("", "right")), np.arange(8, dtype=np.float32).reshape(2, 4))
    store, _ = QuoteStore.open(folder, stored_base())
    store.add(20, QuoteRecord("a"), np.ones(4, np.float32), examples)
    store.add(21, QuoteRecord("b"), np.ones(4, np.float32), examples)
    store.close()
    _, saved = QuoteStore.open(folder, stored_base())
    assert list(saved.examples) == [20, 21] and saved.examples[20].contexts == examples.contexts
    np.testing.assert_array_equal(saved.examples[21].vectors, examples.vectors)
    # A crash while the last line was written: that add was never acknowledged and is dropped, examples and all.
    log = folder / log_name(0)
    log.write_bytes(log.read_bytes()[:-40])
    _, saved = QuoteStore.open(folder, stored_base())
    assert len(saved.records) == 21 and list(saved.examples) == [20] and saved.next_id == 21


def test_damaged_examples_are_an_error_with_their_place(tmp_path):
    folder = tmp_path / LIVE_FOLDER
    folder.mkdir()
    line = '{"id": 20, "quote": "a", "vector": "AAAAAAAAAAAAAAAAAAAAAA==", "examples": [{"left": "x", "right": 1}]}\n'
    (folder / log_name(0)).write_text(line + line.replace('"id": 20', '"id": 21'), encoding="utf-8")
    with pytest.raises(InputError, match=r"changes\.0\.jsonl:1: expected \"examples\""):
        QuoteStore.open(folder, stored_base())


def test_removing_a_quote_drops_its_examples(hybrid, tmp_path):
    state = tmp_path / "state"
    recommender = Recommender(hybrid, state=state)
    learned_id, _ = recommender.quotes.add(QUOTE, EXAMPLES)
    assert first(recommender) == learned_id
    recommender.quotes.remove(learned_id)
    plain_id, created = recommender.quotes.add(QUOTE)  # the same text, now without examples
    assert created and first(recommender) != plain_id and recommender.quotes.example_count(plain_id) == 0
    recommender.quotes.close()
    reopened = Recommender(hybrid, state=state)
    assert first(reopened) != plain_id and reopened.quotes.example_count(plain_id) == 0


# Schemathesis over a server hosting a hybrid bundle (en) beside one that is not (zh): the document says that
# only en takes examples, and the server does as it says. 60 examples a mode: among them adds to en with
# examples that are accepted (201), refused as listed otherwise (409), and invalid ones (422).
def mixed_app():
    """The app under test; the bundles' files are read as they are made, so their folder can go."""
    with tempfile.TemporaryDirectory() as folder:
        english = tiny_bundle(Path(folder, "en"))
        english.fusion, english.info = FUSION, {"usage_pull": PULL}
        chinese = tiny_bundle(Path(folder, "zh"), Language.ZH)
        recommenders = [Recommender(english), Recommender(chinese)]
    return create_app(recommenders, AppConfig(limits=ServerLimits(allowed_hosts=("testserver",))))


MIXED = schemathesis.openapi.from_asgi(
    "/openapi.json",
    mixed_app(),
    config=schemathesis.Config.from_dict(
        {"generation": {"mode": "all", "max-examples": 60, "deterministic": True}, "checks": {"enabled": True}}
    ),
).include(path="/quotes", method="POST")


@MIXED.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_only_a_hybrid_bundle_takes_examples_as_the_document_says(case):
    response = case.call_and_validate()
    assert response.status_code < 500
