"""What the server refuses, and how: every bad request gets a 4xx JSON error that names what is wrong and never
echoes the input; a full queue gets 503 with Retry-After; the demo page is sent with security headers."""

import asyncio
import base64
import hashlib
import json
import re
import threading

import httpx
import pytest
from fastapi.testclient import TestClient

from quoter.languages import Language
from quoter.serving.http.app import AppConfig, create_app
from quoter.serving.http.schemas import MAX_BATCH, MAX_CONTEXT_CHARS, ErrorResponse
from quoter.serving.http.server_limits import ServerLimits, hosts_for_address
from quoter.serving.recommender import Recommender
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    return tiny_bundle(tmp_path_factory.mktemp("bundle"), Language.EN)


def make_client(bundle, **limits):
    """A keyless app of one recommender with these limits, the others default."""
    app = create_app([Recommender(bundle)], AppConfig(limits=ServerLimits(**limits)))
    return TestClient(app, base_url=LOOPBACK_URL)


@pytest.fixture
def client(english):
    with make_client(english) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        # JSON the validator refused but could not echo back: these were 500s with a plain-text body.
        ("/recommend", b'{"left": "a", "k": NaN}', "k"),
        ("/recommend", b'{"left": "a", "k": 1e400}', "k"),
        ("/recommend", b'{"left": "\\ud800 a"}', "left"),
        ("/quotes", b'{"quote": "\\ud800"}', "quote"),
        ("/quotes", b'{"quote": "a dog", "source": "x \\udfff"}', "source"),
        # Loose types: these were taken as k = 1 and k = 5; a fraction is no integer.
        ("/recommend", b'{"left": "a", "k": true}', "k"),
        ("/recommend", b'{"left": "a", "k": "5"}', "k"),
        ("/recommend", b'{"left": "a", "k": 5.5}', "k"),
    ],
)
def test_unencodable_or_loosely_typed_fields_are_422_naming_the_field(client, path, body, field):
    response = client.post(path, content=body, headers=JSON)
    assert response.status_code == 422 and response.headers["content-type"] == "application/json"
    assert [error["loc"] for error in response.json()["detail"]] == [["body", field]]
    assert client.get("/quotes").json()["total"] == 5  # nothing was listed


def test_an_integer_written_with_a_point_or_exponent_is_that_integer(client):
    # JSON Schema counts 5.0 as an integer: the OpenAPI document says k is one, so 5.0 is taken (was a 422).
    for k in (b"5.0", b"5e0", b"0.5e1"):
        response = client.post("/recommend", content=b'{"left": "the cat", "k": ' + k + b"}", headers=JSON)
        assert response.status_code == 200 and len(response.json()["results"]) == 5


def test_errors_never_echo_the_input(client):
    long_left = "x" * (MAX_CONTEXT_CHARS + 1)
    response = client.post("/recommend", json={"left": long_left, "lang": "y" * 1000, "k": "z" * 1000})
    assert response.status_code == 422
    assert {tuple(error["loc"]) for error in response.json()["detail"]} == {
        ("body", "left"),
        ("body", "lang"),
        ("body", "k"),
    }
    assert len(response.content) < 1000 and "xxx" not in response.text and "yyy" not in response.text


def test_bodies_over_the_limit_are_413_whether_announced_or_streamed(english):
    with make_client(english, max_body_bytes=1000) as client:
        response = client.post("/recommend", json={"left": "a" * 990})
        assert response.status_code == 413 and response.json() == {
            "detail": [{"loc": ["body"], "msg": "the request body is larger than 1,000 bytes", "type": "too_large"}]
        }
        chunks = (b'{"left": "' + b"a" * 400 if n == 0 else b"a" * 400 for n in range(3))  # no Content-Length
        assert client.post("/recommend", content=chunks, headers=JSON).status_code == 413
        assert client.post("/recommend", json={"left": "the cat " * 100}).status_code == 200


def test_the_default_limit_takes_the_largest_valid_batch(client):
    # 64 contexts of 2 x 2,000 non-ASCII characters, each written as a 6-byte \u escape: about 1.5 MB.
    context = {"left": "é" * MAX_CONTEXT_CHARS, "right": "é" * MAX_CONTEXT_CHARS, "lang": "en", "k": 1}
    body = json.dumps({"requests": [context] * MAX_BATCH}).encode()
    assert len(body) > 1_500_000
    response = client.post("/recommend/batch", content=body, headers=JSON)
    assert response.status_code == 200 and len(response.json()["responses"]) == MAX_BATCH


@pytest.mark.parametrize(
    ("body", "content_type", "status", "detail"),
    [
        (b"[" * 100_000, "application/json", 400, "the body's JSON is nested too deeply"),
        (b'{"left": "\xff"}', "application/json", 400, "the body is not UTF-8: invalid start byte at byte 10"),
        (b'{"left": "a"', "application/json", 400, "the body is not valid JSON: Expecting ',' delimiter"),
        (b'{"left": "a"}', "text/plain", 415, "Content-Type: application/json"),
        (b'{"left": "a"}', None, 415, "Content-Type: application/json"),
    ],
)
def test_bodies_that_cannot_be_read_say_why(client, body, content_type, status, detail):
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = client.post("/recommend", content=body, headers=headers)
    assert response.status_code == status and detail in response.json()["detail"][0]["msg"]


def test_a_loopback_server_answers_only_loopback_host_names(client):
    # DNS rebinding: a page on attacker.example resolves its own name to 127.0.0.1 and posts to the server.
    response = client.post("/quotes", json={"quote": "a rebinding quote"}, headers={"Host": "attacker.example"})
    assert response.status_code == 400 and response.json() == {  # was Starlette's plain text
        "detail": [
            {
                "loc": ["header", "host"],
                "msg": "this server does not answer that Host name",
                "type": "host_not_answered",
            }
        ]
    }
    assert client.get("/quotes", params={"q": "rebinding"}).json()["total"] == 0
    for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000"):
        assert client.get("/health", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (b'{"left": "a", "k": ' + b"9" * 5000 + b"}", ["body", "k"]),
        (b'{"left": "a", "lang": -' + b"1" * 4301 + b"}", ["body", "lang"]),
        (b'{"requests": [{"left": "a", "k": ' + b"9" * 5000 + b"}]}", ["body", "requests", 0, "k"]),
    ],
)
def test_an_integer_too_long_to_read_is_422_naming_the_field(client, body, loc):
    # This was FastAPI's 400 "There was an error parsing the body".
    path = "/recommend/batch" if body.startswith(b'{"requests"') else "/recommend"
    response = client.post(path, content=body, headers=JSON)
    assert response.status_code == 422 and response.json() == {
        "detail": [{"loc": loc, "msg": "the number has more than 4,300 digits", "type": "int_too_long"}]
    }


def test_every_error_has_the_one_documented_shape(english):
    app = create_app([Recommender(english)], AppConfig(api_key="k"))
    with TestClient(app, base_url=LOOPBACK_URL) as client:
        responses = [
            client.get("/health", headers={"Host": "attacker.example"}),  # 400
            client.post("/recommend", content=b"{", headers=JSON),  # 400
            client.post("/quotes", json={"quote": "a"}),  # 401
            client.post("/quotes", json={"quote": "a"}, headers={"X-API-Key": "no"}),  # 403
            client.delete("/quotes/99", headers={"X-API-Key": "k"}),  # 404
            client.get("/no/such/path"),  # 404
            client.put("/recommend"),  # 405
            client.post("/quotes", json={"quote": "the dog ran home", "source": "Zoo"}, headers={"X-API-Key": "k"}),
            client.post("/recommend", content=b"{}", headers={"Content-Type": "text/plain"}),  # 415
            client.post("/recommend", json={"left": 1}),  # 422
        ]
        schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert [r.status_code for r in responses] == [400, 400, 401, 403, 404, 404, 405, 409, 415, 422]
    for response in responses:
        assert response.headers["content-type"] == "application/json"
        ErrorResponse.model_validate_json(response.content, strict=True)
        assert len(response.json()["detail"]) == 1 and set(response.json()) == {"detail"}
    assert set(schema["ErrorDetail"]["properties"]) == {"loc", "msg", "type"}


def test_default_host_names_follow_the_bound_address():
    assert hosts_for_address("127.0.0.1") == hosts_for_address("::1") == ("127.0.0.1", "localhost", "[::1]")
    assert hosts_for_address("0.0.0.0") == hosts_for_address("::") == ("*",)
    assert hosts_for_address("192.168.1.5") == ("192.168.1.5",)
    assert hosts_for_address("fe80::1") == ("[fe80::1]",)


def test_any_host_when_configured(english):
    with make_client(english, allowed_hosts=("*",)) as client:
        assert client.get("/health", headers={"Host": "quoter.example"}).status_code == 200


def test_the_demo_page_comes_with_security_headers(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["x-frame-options"] == "DENY" and response.headers["x-content-type-options"] == "nosniff"
    policy = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    assert policy["frame-ancestors"] == "'none'" and policy["default-src"] == "'self'"
    # The page's own inline script and style are allowed by their hashes, and nothing else inline.
    for tag in ("script", "style"):
        [code] = re.findall(rf"<{tag}>(.*?)</{tag}>", response.text, re.DOTALL)
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert policy[f"{tag}-src"] == f"'sha256-{digest}'"


def test_a_full_queue_is_503_with_retry_after(english, monkeypatch):
    recommender = Recommender(english)
    encoding, release = threading.Event(), threading.Event()
    encode = recommender.context_encoder.encode

    def held_encode(*args, **kwargs):
        encoding.set()
        release.wait(10)
        return encode(*args, **kwargs)

    monkeypatch.setattr(recommender.context_encoder, "encode", held_encode)
    app = create_app([recommender], AppConfig(limits=ServerLimits(max_queued_contexts=MAX_BATCH)))
    full_batch = {"requests": [{"left": "the cat", "k": 1}] * MAX_BATCH}

    async def drive():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=LOOPBACK_URL) as client:
            batch = asyncio.create_task(client.post("/recommend/batch", json=full_batch))
            await asyncio.to_thread(encoding.wait, 10)  # the batch is in, the queue is full
            refused = await client.post("/recommend", json={"left": "the dog"})
            invalid = await client.post("/recommend", json={"left": "the dog", "k": 0})  # validated first
            release.set()
            return refused, invalid, await batch, await client.post("/recommend", json={"left": "the dog"})

    refused, invalid, batch, later = asyncio.run(drive())
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "busy" in refused.json()["detail"][0]["msg"]
    assert invalid.status_code == 422
    assert batch.status_code == 200 and later.status_code == 200


@pytest.mark.parametrize(
    "host",
    ["[::1]evil.example", "localhost:99999", "localhost:0", "localhost:80x", "localhost:", "[::1", "[evil]", "a b"],
)
def test_a_malformed_host_header_is_400_whatever_the_hosts_answered(english, host):
    # These were answered: the name was read up to the bracket or colon, and the rest ignored.
    for allowed in (ServerLimits().allowed_hosts, ("*",)):
        with make_client(english, allowed_hosts=allowed) as client:
            response = client.get("/health", headers={"Host": host})
        assert response.status_code == 400 and response.json() == {
            "detail": [
                {
                    "loc": ["header", "host"],
                    "msg": "the Host header must be given once, as a name with an optional port",
                    "type": "host_invalid",
                }
            ]
        }


def test_two_host_headers_are_400(english):
    with make_client(english, allowed_hosts=("*",)) as client:
        response = client.get("/health", headers=[("Host", "127.0.0.1"), ("Host", "127.0.0.1")])
    assert response.status_code == 400 and response.json()["detail"][0]["type"] == "host_invalid"
