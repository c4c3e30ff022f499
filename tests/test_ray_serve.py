"""`quoter serve --engine ray`: the app in Ray Serve replicas on one local Ray cluster (2 CPUs) for the module,
each replica building its own recommenders from a tiny bundle; quote changes shared through PostgreSQL
(postgres_fixtures). Every wait is bounded, and an error in a client thread fails the test that runs it."""

from __future__ import annotations

import functools
import http.client
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import httpx
import pytest
import ray
from ray import serve
from typer.testing import CliRunner

from quoter.cli import app
from quoter.cli.serve_commands import Hosted, hosted_app
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.languages import Language
from quoter.serving.http.schemas import MAX_PAGE
from quoter.serving.ray_serve import (
    APP_NAME,
    DEPLOYMENT_NAME,
    LOST_REQUEST_RETRY_AFTER_S,
    REPLICA_HEADER,
    RUNTIME_ENV,
    quoter_application,
)
from quoter.serving.settings import EngineKind, ServeConfig, ServeEngineConfig
from tests.serving_fixtures import tiny_bundle

CONTEXT = {"left": "the cat", "right": "on the mat", "k": 3}
# The longest any step waits for what it waits for (replicas answering, following a change, a response).
WAIT_S = 60
CLIENTS = 2
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def port():
    """One local Ray cluster for the module, in the server's environment (its proxy's middlewares), with Serve's
    HTTP proxy on a free loopback port."""
    ray.init(num_cpus=2, include_dashboard=False, runtime_env=RUNTIME_ENV)
    number = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": number})
    yield number
    serve.shutdown()
    ray.shutdown()


@pytest.fixture
def replicas(port, tmp_path):
    """A function that runs the server's app in two replicas over one tiny English bundle, its quote changes kept
    in the PostgreSQL database `store` (None: the bundle folder); it returns the app's URL."""
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    settings = ServeConfig(
        runtime=ContextRuntime.TORCH, threads=1, port=port, engine=ServeEngineConfig(EngineKind.RAY, replicas=2)
    )

    def run(store: str | None = None) -> str:
        hosted = Hosted([f"en={tmp_path / 'bundle-en'}"], [], [Language.EN], None, store)
        build = functools.partial(hosted_app, hosted, None, settings)
        serve.run(quoter_application(build, settings), name=APP_NAME)
        return f"http://127.0.0.1:{port}"

    yield run
    serve.delete(APP_NAME)


def replica_actor(replica: str) -> ray.actor.ActorHandle:
    """The Ray actor of a replica, by the name it gives in its responses."""
    return ray.get_actor(f"SERVE_REPLICA::{APP_NAME}#{DEPLOYMENT_NAME}#{replica}", namespace="serve")


def kill_replica(replica: str) -> None:
    """Kill a replica's actor, as a crash of its process would."""
    ray.kill(replica_actor(replica))


def wait_until(condition: Callable[[], T], what: str, workers: Sequence[Future] = ()) -> T:
    """The first true value of `condition()`, asked every 50 ms for at most WAIT_S; a worker that ended meanwhile
    raises its error here."""
    deadline = time.monotonic() + WAIT_S
    while not (value := condition()):
        for worker in workers:
            if worker.done():
                worker.result()
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_S} s"
        time.sleep(0.05)
    return value


def kill_a_replica_during(
    work: Callable[[threading.Event], None],
    replicas: Callable[[], list[str]],
    enough: Callable[[float], bool],
) -> tuple[str, float]:
    """Run `work(stop)` in CLIENTS threads until `stop` is set; once both replicas have answered (`replicas()`:
    who answered, in order), kill the one that answered last, and let the work go on until `enough(killed_at)`;
    return the victim and when it died. An error of the work is raised here."""
    stop = threading.Event()
    with ThreadPoolExecutor(CLIENTS) as pool:
        workers = [pool.submit(work, stop) for _ in range(CLIENTS)]
        try:
            wait_until(lambda: len(set(replicas())) == 2, "both replicas answering", workers)
            victim = replicas()[-1]
            kill_replica(victim)
            killed_at = time.monotonic()
            wait_until(lambda: enough(killed_at), "answers after the kill", workers)
        finally:
            stop.set()
        for worker in workers:
            worker.result(timeout=WAIT_S)
    return victim, killed_at


def answers_of_both(client: httpx.Client) -> dict[str, list[dict]]:
    """The answers to the same request by replica, asked until two replicas have answered."""
    answers: dict[str, list[dict]] = {}

    def both_answered() -> bool:
        response = client.post("/recommend", json=CONTEXT)
        assert response.status_code == 200, response.text
        answers.setdefault(response.headers[REPLICA_HEADER], []).append(response.json())
        return len(answers) == 2

    wait_until(both_answered, "both replicas answering")
    return answers


def test_two_replicas_answer_the_same_request_identically_with_the_apps_limits(replicas):
    with httpx.Client(base_url=replicas()) as client:
        answers = answers_of_both(client)
        assert len(answers) == 2
        bodies = [body for replica in answers.values() for body in replica]
        assert all(body == bodies[0] for body in bodies) and len(bodies[0]["results"]) == 3
        # The app itself answers through Ray's proxy: its page, its OpenAPI, its Host check and body limit.
        assert client.get("/").headers["content-type"].startswith("text/html")
        assert "/recommend/batch" in client.get("/openapi.json").json()["paths"]
        assert client.get("/health", headers={"Host": "quoter.example"}).status_code == 400
        assert client.post("/recommend", json={"left": "x" * 3_000_000}).status_code == 413


def is_lost_request_answer(response: httpx.Response) -> bool:
    """Whether a response is the JSON 503 with Retry-After of a request whose replica stopped before answering."""
    return (
        response.status_code == 503
        and response.headers["content-type"] == "application/json"
        and response.headers["retry-after"] == str(LOST_REQUEST_RETRY_AFTER_S)
        and response.json()["detail"][0]["type"] == "replica_lost"
    )


def test_when_a_replica_is_killed_the_other_keeps_answering(replicas):
    answers: list[tuple[float, httpx.Response]] = []
    url = replicas()

    def ask(stop: threading.Event) -> None:
        with httpx.Client(base_url=url, timeout=WAIT_S) as client:
            while not stop.is_set():
                answers.append((time.monotonic(), client.post("/recommend", json=CONTEXT)))

    def enough(killed_at: float) -> bool:
        return sum(at > killed_at for at, _ in answers) > 20

    def replicas_that_answered() -> list[str]:
        return [response.headers[REPLICA_HEADER] for _, response in answers if response.status_code == 200]

    victim, killed_at = kill_a_replica_during(ask, replicas_that_answered, enough)
    after = [response for at, response in answers if at > killed_at]
    # Only the requests the victim held when it died may fail, each with a 503 to retry; every later one is
    # answered by another replica.
    failed = [response for response in after if response.status_code != 200]
    assert len(failed) <= CLIENTS and all(map(is_lost_request_answer, failed)), [r.text for r in failed]
    answered_late = [response.headers[REPLICA_HEADER] for response in after[CLIENTS:] if response.status_code == 200]
    assert answered_late and victim not in answered_late


def test_a_request_whose_replica_is_killed_is_answered_503_in_json_with_retry_after(replicas, port):
    with httpx.Client(base_url=replicas()) as client:
        names = list(answers_of_both(client))
    body = json.dumps(CONTEXT).encode()
    head = ["POST /recommend HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as connection:
        # Part of the body: the replica that takes the request waits in it for the rest.
        connection.sendall("\r\n".join([*head, f"Content-Length: {len(body)}", "", ""]).encode() + body[:5])

        def holder() -> str | None:
            held = {
                name: ray.get(replica_actor(name).get_num_ongoing_requests.remote(), timeout=WAIT_S) for name in names
            }
            return next((name for name, count in held.items() if count), None)

        kill_replica(wait_until(holder, "a replica holding the request"))
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        response = httpx.Response(answer.status, headers=answer.getheaders(), content=answer.read())
    assert is_lost_request_answer(response), (response.status_code, response.headers, response.text)
    assert "send it again" in response.json()["detail"][0]["msg"]


def test_a_quote_added_through_one_replica_is_listed_and_ranked_by_the_other_once_it_follows(replicas, postgres_url):
    with httpx.Client(base_url=replicas(postgres_url)) as client:
        added = client.post("/quotes", json={"quote": "curiosity killed the cat", "lang": "en"})
        assert added.status_code == 201, added.text
        quote_id, adder = added.json()["id"], added.headers[REPLICA_HEADER]
        # Who listed it, and who ranked it: the replica that added it from its answer on, the other once it has
        # followed the change (the follower promises no sooner), and each from then on.
        seen: dict[str, set[str]] = {"listed": {adder}, "ranked": {adder}}

        def note(kind: str, response: httpx.Response, ids: list[int]) -> None:
            replica = response.headers[REPLICA_HEADER]
            if quote_id in ids:
                seen[kind].add(replica)
            else:
                assert replica not in seen[kind], f"{replica} {kind} the quote, then no more"

        def the_other_lists_and_ranks_it() -> bool:
            listed = client.get("/quotes", params={"q": "curiosity"})
            ranked = client.post("/recommend", json={**CONTEXT, "k": 100})
            assert [quote["id"] for quote in listed.json()["quotes"]] in ([], [quote_id])
            note("listed", listed, [quote["id"] for quote in listed.json()["quotes"]])
            note("ranked", ranked, [result["id"] for result in ranked.json()["results"]])
            return all(len(replicas) == 2 for replicas in seen.values())

        wait_until(the_other_lists_and_ranks_it, "the other replica following the add")


def test_killing_a_replica_while_quotes_are_added_loses_no_acknowledged_add(replicas, postgres_url):
    url = replicas(postgres_url)
    acknowledged: dict[str, int] = {}
    answered: list[tuple[float, str]] = []
    writers = itertools.count()

    def add(stop: threading.Event) -> None:
        writer = next(writers)
        with httpx.Client(base_url=url, timeout=WAIT_S) as client:
            for number in itertools.count():
                if stop.is_set():
                    return
                quote = f"saying {writer}-{number}"
                response = client.post("/quotes", json={"quote": quote, "lang": "en"})
                if response.status_code == 201:
                    acknowledged[quote] = response.json()["id"]
                    answered.append((time.monotonic(), response.headers[REPLICA_HEADER]))
                else:
                    assert is_lost_request_answer(response), response.text

    def enough(killed_at: float) -> bool:
        return sum(at > killed_at for at, _ in answered) > 20

    victim, killed_at = kill_a_replica_during(add, lambda: [replica for _, replica in answered], enough)
    assert {replica for at, replica in answered if at > killed_at} - {victim}, "no add after the kill"
    listed: dict[str, int] = {}
    with httpx.Client(base_url=url) as client:
        for offset in itertools.count(0, MAX_PAGE):
            page = client.get("/quotes", params={"q": "saying", "offset": offset, "limit": MAX_PAGE}).json()
            listed.update((quote["quote"], quote["id"]) for quote in page["quotes"])
            if offset + MAX_PAGE >= page["total"]:
                break
    assert len(acknowledged) > 20 and listed.items() >= acknowledged.items()


def test_replicas_that_could_disagree_are_refused_in_one_line(tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle-en")
    bundle = f"en={tmp_path / 'bundle-en'}"
    result = subprocess.run(
        [sys.executable, "-m", "quoter", "serve", "--engine", "ray", "--replicas", "2", "--bundle", bundle],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: 2 replicas would each keep their own copy of the quote set, and a quote added through one would be "
        "missing from the others: give --store postgresql://..., or --replicas 1"
    ]
    runner = CliRunner()
    refused = {
        ("--engine", "ray", "--autoscale", "1:3"): "3 replicas would each keep their own copy",
        ("--engine", "ray", "--autoscale", "3:1"): "engine.autoscale: expected MIN:MAX replicas with 1 <= MIN <= MAX",
        ("--engine", "ray", "--autoscale", "1:2", "--replicas", "2"): "engine.autoscale: give it or replicas",
        ("--replicas", "2"): "engine.replicas: needs the ray engine (--engine ray)",
        ("--address", "auto"): "engine.address: needs the ray engine (--engine ray)",
    }
    for options, message in refused.items():
        result = runner.invoke(app, ["serve", "--bundle", bundle, *options])
        assert message in str(result.exception), options
