"""A real server, started as `quoter serve` starts it, cuts off clients that send a request's head or body
byte by byte (or nothing at all), and answers others meanwhile."""

import json
import socket
import threading
import time
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.serving.http.server_limits import ServerLimits
from tests.serving_fixtures import tiny_bundle

TIMEOUT_S = 1
# How long a cut-off may take past its timeout on a loaded machine; a connection held open without limit
# would still be open then.
GRACE_S = 4
BODY = b'{"left": "the cat sat", "k": 2}'


@contextmanager
def running(app, options):
    """Run uvicorn as `quoter serve` would (its options) on a free loopback port; yield the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


class SlowClient(threading.Thread):
    """Sends `first`, then `trickle` one byte every 0.2 s, until the server closes the connection; records
    what came back and when the connection was closed (seconds after the start)."""

    def __init__(self, port: int, first: bytes, trickle: bytes) -> None:
        super().__init__(daemon=True)
        self.port, self.first, self.trickle = port, first, trickle
        self.received, self.closed_after = b"", None

    def run(self) -> None:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            sock.settimeout(0.2)
            sock.sendall(self.first)
            for byte in [self.trickle[i : i + 1] for i in range(len(self.trickle))]:
                try:
                    data = sock.recv(65536)
                    self.received += data
                    if not data:
                        break
                except TimeoutError:
                    pass
                except OSError:  # reset: a byte sent after the server closed; what it sent was read before
                    break
                try:
                    sock.sendall(byte)
                except OSError:
                    break
            self.closed_after = time.monotonic() - start


def head(method: str = "GET", path: str = "/health", length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.fixture
def server(served, tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle")
    result, calls = served(
        "--bundle", f"en={tmp_path / 'bundle'}", "--header-timeout", TIMEOUT_S, "--body-timeout", TIMEOUT_S
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with running(calls["app"], calls["options"]) as port:
        yield port


def test_slow_heads_and_bodies_are_cut_off_while_others_are_served(server):
    never = b" " * 100  # more bytes, 0.2 s apart, than fit into the timeout and its grace
    slow_head = SlowClient(server, b"GET /health HTTP/1.1\r\n", b"X-Slow: " + never)
    slow_body = SlowClient(server, head("POST", "/recommend", len(BODY) + len(never)), BODY[:-1] + never)
    with socket.create_connection(("127.0.0.1", server)) as silent:  # sends nothing at all
        start = time.monotonic()
        slow_head.start()
        slow_body.start()
        with httpx.Client(base_url=f"http://127.0.0.1:{server}") as normal:
            answered = [normal.post("/recommend", json={"left": "the dog", "k": 1}) for _ in range(3)]
        answered_after = time.monotonic() - start
        assert [response.status_code for response in answered] == [200, 200, 200]
        silent.settimeout(TIMEOUT_S + GRACE_S)
        assert silent.recv(1) == b""  # closed by the server
        assert TIMEOUT_S - 0.1 < time.monotonic() - start < TIMEOUT_S + GRACE_S
    slow_head.join(TIMEOUT_S + GRACE_S)
    slow_body.join(TIMEOUT_S + GRACE_S)

    assert slow_head.closed_after is not None and TIMEOUT_S - 0.1 < slow_head.closed_after < TIMEOUT_S + GRACE_S
    assert slow_head.received == b""
    assert slow_body.closed_after is not None and TIMEOUT_S - 0.1 < slow_body.closed_after < TIMEOUT_S + GRACE_S
    status_line, _, rest = slow_body.received.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.startswith(b"HTTP/1.1 408") and b"connection: close" in headers.lower()
    assert json.loads(body) == {
        "detail": [
            {"loc": ["body"], "msg": f"the request body did not arrive within {TIMEOUT_S} s", "type": "body_timeout"}
        ]
    }
    assert answered_after < min(slow_head.closed_after, slow_body.closed_after)  # served meanwhile


def test_an_idle_kept_alive_connection_is_not_cut_off_by_the_head_timeout(server):
    # The head's deadline starts at its first byte: waiting between requests is the keep-alive's to limit.
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        for _ in range(2):
            sock.sendall(head())
            response = b""
            while b'"status":"ok"' not in response:
                chunk = sock.recv(65536)
                assert chunk, "the connection was closed"
                response += chunk
            assert response.startswith(b"HTTP/1.1 200")
            time.sleep(TIMEOUT_S + 0.5)


def test_timeouts_are_bounded_settings():
    assert (ServerLimits().header_timeout_s, ServerLimits().body_timeout_s) == (10, 60)
    for name in ("header_timeout_s", "body_timeout_s"):
        with pytest.raises(QuoterError, match=f"{name}: must be at least 1, got 0"):
            ServerLimits(**{name: 0})
