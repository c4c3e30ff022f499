"""Characters no text may hold (control characters, ANSI escapes among them; bidirectional controls; tag
characters) and texts that show nothing: refused alike by the API, whatever the store, with a 422 naming the
field and not repeating the text, and by the quote-list and usage-example readers, naming file and line."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from quoter.bundle import Bundle, QuoteRecord
from quoter.datasets import Sample
from quoter.errors import InputError
from quoter.fusion import Fusion
from quoter.languages import Language
from quoter.quote_bank.usage import read_usage_file
from quoter.quote_list import read_quote_list, read_quote_tsv
from quoter.ranking import Query
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.recommender import Recommender
from quoter.text_safety import check_quote_input, unsafe_text
from tests.serving_fixtures import LOOPBACK_URL, QUOTES, tiny_bundle

# One text of each refused kind, with the message it gets.
REFUSED = {
    "nul": ("a\x00b", "not allowed: a control character (U+0000) at character 2"),
    "c1": ("a\x85b", "not allowed: a control character (U+0085) at character 2"),
    "ansi": ("\x1b[31mred", "not allowed: a control character (U+001B) at character 1"),
    "override": ("abc\u202e", "not allowed: a bidirectional embedding or override (U+202E) at character 4"),
    "isolate": ("\u2067abc", "not allowed: a bidirectional isolate (U+2067) at character 1"),
    "tag": ("flag\U000e0041", "not allowed: a tag character (U+E0041) at character 5"),
}
KINDS = list(REFUSED)
MULTILINE = "a line\tand a tab\nand another line"
SHOWS_NOTHING = "\u200b\u200c\u200d"  # zero-width characters only
NO_CONTEXT = "there is no text around the gap"


def test_each_refused_kind_is_named_with_its_code_point_and_place():
    for text, message in REFUSED.values():
        assert unsafe_text(text) == message and unsafe_text(text, multiline=True) == message
    assert unsafe_text(MULTILINE, multiline=True) is None
    assert unsafe_text(MULTILINE) == "not allowed: a control character (U+0009) at character 7"
    assert unsafe_text("one\r\ntwo", multiline=True) is None  # Windows line ends
    assert unsafe_text("one\r\ntwo") == "not allowed: a control character (U+000D) at character 4"
    # Other invisible or unusual characters are text: zero-width joiners of emoji, marks, Chinese, emoji.
    for text in ("学而时习之，不亦说乎", "👩\u200d💻 \u200e\u00ad", "🏴 flag", "\u2028", "e\u0301"):
        assert unsafe_text(text) is None


def test_the_live_sets_check_names_the_field():
    refused = [
        (QuoteRecord("a\x00"), "quote", "not allowed"),
        (QuoteRecord(SHOWS_NOTHING), "quote", "the quote has no letter"),
        (QuoteRecord("a quote", "a\x1b[0m"), "source", "not allowed"),
        (QuoteRecord("a quote", SHOWS_NOTHING), "source", "the source has no letter"),
        (QuoteRecord("a quote", "", " "), "gloss", "the gloss has no letter"),
        (QuoteRecord("a quote", "", "a\u202d"), "gloss", "not allowed"),
    ]
    for record, field, message in refused:
        with pytest.raises(InputError, match=message) as caught:
            check_quote_input(record)
        assert caught.value.field == field
    with pytest.raises(InputError, match=r"\(U\+2066\) at character 1 \(usage example 2, right\)") as caught:
        check_quote_input(QuoteRecord("a quote"), [Query("a", "b"), Query("c", "\u2066d")])
    assert caught.value.field == "examples"
    check_quote_input(QuoteRecord("a quote", "", ""), [Query(MULTILINE, ""), Query("", MULTILINE)])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Bundle:
    return tiny_bundle(tmp_path_factory.mktemp("bundle"))


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> Bundle:
    """A tiny hybrid bundle, which learns from the usage examples a quote is added with."""
    bundle = tiny_bundle(tmp_path_factory.mktemp("hybrid"))
    known = [Sample("my pet", 0, "purred", 1), Sample("the farm animal", 1, "barked at me", 2)]
    bundle.fusion = Fusion(weights={"dense": 1.0, "bm25": 1.0, "crm": 1.0, "knn": 1.0})
    bundle.known_contexts = known
    bundle.known_vectors = bundle.context_encoder.encode([Query(sample.left, sample.right) for sample in known])
    return bundle


@pytest.fixture
def client(hybrid):
    """An app over the hybrid bundle, its quote set changed in memory only."""
    with TestClient(create_app([Recommender(hybrid)]), base_url=LOOPBACK_URL) as client:
        yield client


def refused_at(response, loc: list, message: str, sent: str) -> None:
    """A 422 whose one error is at `loc`, says `message`, and does not repeat what was `sent`."""
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == loc and message in error["msg"]
    assert set(error) == {"loc", "msg", "type"} and (not sent or sent not in error["msg"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("field", ["quote", "source", "gloss"])
def test_a_quote_source_or_gloss_with_a_refused_character_is_422_naming_the_field(client, field, kind):
    text, message = REFUSED[kind]
    body = {"quote": "a new quote", field: text}
    refused_at(client.post("/quotes", json=body), ["body", field], message, text)
    assert client.get("/quotes").json()["total"] == len(QUOTES[Language.EN])


@pytest.mark.parametrize("field", ["source", "gloss"])
def test_a_source_or_gloss_that_shows_nothing_is_refused_like_a_quote(client, field):
    message = f"the {field} has no letter, number, punctuation or symbol"
    for text in (SHOWS_NOTHING, " \u2060"):
        refused_at(client.post("/quotes", json={"quote": "a new quote", field: text}), ["body", field], message, text)
    assert client.post("/quotes", json={"quote": "a new quote", field: ""}).status_code == 201


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_usage_example_with_a_refused_character_is_422_naming_its_side(client, side, kind):
    text, message = REFUSED[kind]
    body = {"quote": "a new quote", "examples": [{"left": "fine", "right": "fine", side: text}]}
    refused_at(client.post("/quotes", json=body), ["body", "examples", 0, side], message, text)


def test_tabs_and_line_feeds_in_usage_examples_are_accepted(client):
    examples = [{"left": MULTILINE, "right": "!"}, {"left": "", "right": MULTILINE}]
    response = client.post("/quotes", json={"quote": "a new quote", "examples": examples})
    assert response.status_code == 201, response.text
    assert client.get("/quotes", params={"q": "a new quote"}).json()["quotes"][0]["examples"] == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_context_with_a_refused_character_is_422_naming_its_side(client, side, kind):
    text, message = REFUSED[kind]
    body = {"left": "the cat", "right": "home", side: text, "lang": "en"}
    refused_at(client.post("/recommend", json=body), ["body", side], message, text)
    batch = {"requests": [{"left": "the cat"}, body]}
    refused_at(client.post("/recommend/batch", json=batch), ["body", "requests", 1, side], message, text)


def test_a_context_with_tabs_and_line_feeds_is_answered(client):
    for body in ({"left": MULTILINE}, {"left": "", "right": MULTILINE}):
        response = client.post("/recommend", json={**body, "lang": "en", "k": 2})
        assert response.status_code == 200 and len(response.json()["results"]) == 2


@pytest.mark.parametrize("left", ["", " \t\n", SHOWS_NOTHING, "\u0301"])
def test_a_context_that_shows_nothing_gets_no_answer(client, left):
    body = {"left": left, "right": left, "lang": "en"}
    refused_at(client.post("/recommend", json=body), ["body"], NO_CONTEXT, left)
    assert client.post("/recommend", json={"left": left, "lang": "en"}).status_code == 422
    batch = {"requests": [{"left": "the cat", "lang": "en"}, body]}
    refused_at(client.post("/recommend/batch", json=batch), ["body", "requests", 1], NO_CONTEXT, left)
    # One side that shows something is enough.
    assert client.post("/recommend", json={**body, "right": "?"}).status_code == 200


def test_both_stores_refuse_a_nul_quote_alike(bundle, tmp_path, postgres_url):
    answers = []
    for recommender in (Recommender(bundle, state=tmp_path), Recommender(bundle, database=postgres_url)):
        with TestClient(create_app([recommender], AppConfig()), base_url=LOOPBACK_URL) as client:
            answers.append(client.post("/quotes", json={"quote": "a\x00b", "source": "Anon"}))
            assert client.get("/quotes").json()["total"] == len(QUOTES[Language.EN])
    file_store, database = answers
    refused_at(file_store, ["body", "quote"], REFUSED["nul"][1], "a\x00b")
    assert (database.status_code, database.json()) == (file_store.status_code, file_store.json())


@pytest.mark.parametrize("kind", KINDS)
def test_the_quote_list_readers_refuse_a_line_naming_file_line_and_field(tmp_path, kind):
    text, message = REFUSED[kind]
    tsv, jsonl = tmp_path / "quotes.tsv", tmp_path / "quotes.jsonl"
    tsv.write_text(f"quote\tsource\nKnow thyself.\tDelphi\nBe brief.\t{text}\n", encoding="utf-8")
    jsonl.write_text(
        json.dumps({"quote": "Know thyself."}) + "\n" + json.dumps({"quote": text, "source": "Delphi"}) + "\n",
        encoding="utf-8",
    )
    for path, line, field in ((tsv, 3, "source"), (jsonl, 2, "quote")):
        with pytest.raises(InputError) as caught:
            read_quote_list(path)
        assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)
        assert caught.value.message == message


def test_the_tsv_reader_ends_lines_at_line_feeds_only(tmp_path):
    path = tmp_path / "quotes.tsv"
    # U+0085 and U+001E end a line for str.splitlines: that would cut this line in two, and miscount the next.
    path.write_text("Know thyself.\tDelphi\r\nBe brief.\tDel\x85phi\nSay\x1eno.\tAnon\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"quotes.tsv:2 \(field 'source'\): not allowed: .*\(U\+0085\)"):
        read_quote_tsv(path)
    path.write_text("Know thyself.\tDelphi\r\nBe brief.\tAnon\r\n", encoding="utf-8")
    assert read_quote_tsv(path) == [QuoteRecord("Know thyself.", "Delphi"), QuoteRecord("Be brief.", "Anon")]


def test_a_quote_list_source_or_gloss_that_shows_nothing_is_refused(tmp_path):
    path = tmp_path / "quotes.tsv"
    path.write_text(f"Know thyself.\tDelphi\nBe brief.\tAnon\t{SHOWS_NOTHING}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"quotes.tsv:2 \(field 'gloss'\): the gloss has no letter"):
        read_quote_tsv(path)


def test_the_usage_example_reader_refuses_a_line_naming_file_line_and_field(tmp_path):
    path = tmp_path / "en.written.tsv"
    path.write_text("before\tKnow thyself.\tafter\nbe\x00fore\tKnow thyself.\tafter\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_usage_file(path)
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), 2, "left")
    assert caught.value.message == REFUSED["nul"][1].replace("character 2", "character 3")
