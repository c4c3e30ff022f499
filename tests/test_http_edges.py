"""A real server, started as `quoter serve` starts it, at the edges of HTTP: requests it cannot read, and bodies
framed two ways, get the API's JSON 400 and the connection closed (were uvicorn's text/plain 400, and the
request served); HEAD /health is answered (was 405)."""

import json
import socket

import pytest

from quoter.languages import Language
from tests.serving_fixtures import tiny_bundle
from tests.test_serving_timeouts import running

WAIT_S = 10  # every read: a server that kept a connection open would end the test here
HOST = b"Host: 127.0.0.1\r\n"
UNREADABLE = {
    "detail": [
        {
            "loc": [],
            "msg": "the request is not valid HTTP/1.1: its request line or headers are malformed, or too long",
            "type": "request_invalid",
        }
    ]
}


@pytest.fixture
def server(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle")
    result, calls = served("--bundle", f"en={tmp_path / 'bundle'}")
    assert result.exit_code == 0, result.output
    with running(calls["app"], calls["options"]) as port:
        yield port


def exchange(port: int, request: bytes) -> bytes:
    """What the server sends back for `request` on a new connection, until it closes the connection."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(request)
        while chunk := sock.recv(65536):
            received += chunk
    return received


def parse(response: bytes) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the first response in `response` (a body of its Content-Length)."""
    head, _, rest = response.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, rest[: int(headers.get("content-length", 0))]


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /health HTTP/1.1\r\n\r\n",  # no Host
        b"GET /health HTTP/1.1\r\n" + HOST + HOST + b"\r\n",  # two Hosts
        b"GET /health HTTP/1.1 extra\r\n" + HOST + b"\r\n",  # a bad request line
        b"POST /recommend HTTP/1.1\r\n" + HOST + b"Content-Length: 1x\r\n\r\n",  # a bad Content-Length
        b"GET /health HTTP/1.1\r\n" + HOST + b"Bad Header: x\r\n\r\n",  # a bad header line
    ],
)
def test_a_request_that_is_not_http_gets_the_json_400_and_is_closed(server, request_bytes):
    response = exchange(server, request_bytes)  # returns once the server has closed the connection
    status, headers, body = parse(response)
    assert (status, headers["content-type"], headers["connection"]) == (400, "application/json", "close")
    assert json.loads(body) == UNREADABLE
    assert response.count(b"HTTP/1.1 ") == 1


def test_a_body_framed_by_both_transfer_encoding_and_content_length_is_refused(server):
    body = b'{"left": "the cat"}'
    smuggled = b"GET /health HTTP/1.1\r\n" + HOST + b"\r\n"  # what a proxy reading Content-Length sends next
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    head = b"POST /recommend HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    framed_twice = head + f"Content-Length: {len(chunked)}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    response = exchange(server, framed_twice + chunked + smuggled)
    status, headers, body = parse(response)
    assert (status, headers["connection"]) == (400, "close")
    assert json.loads(body)["detail"] == [
        {
            "loc": ["header", "content-length"],
            "msg": "the request gives its body's length twice, by Transfer-Encoding and Content-Length; give one",
            "type": "body_length_ambiguous",
        }
    ]
    assert response.count(b"HTTP/1.1 ") == 1  # nothing after it was answered


def test_head_health_is_get_without_its_body(server):
    get = exchange(server, b"GET /health HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")
    # Two requests on one connection: had HEAD's response a body, it would come before GET's status line.
    both = exchange(
        server,
        b"HEAD /health HTTP/1.1\r\n" + HOST + b"\r\nGET /health HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n",
    )
    head_status, head_headers, _ = parse(both)
    _, _, after_head = both.partition(b"\r\n\r\n")
    assert head_status == 200 and after_head.startswith(b"HTTP/1.1 200 ")
    get_status, get_headers, get_body = parse(get)
    assert get_status == 200 and json.loads(get_body)["languages"] == ["en"]
    assert head_headers["content-length"] == get_headers["content-length"]
    assert head_headers["content-type"] == get_headers["content-type"] == "application/json"
