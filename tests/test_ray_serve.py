"""`quoter serve --engine ray`: the app in Ray Serve replicas on one local Ray cluster (2 CPUs) for the module,
each replica building its own recommenders from a tiny bundle; quote changes shared through PostgreSQL
(postgres_fixtures)."""

from __future__ import annotations

import functools
import itertools
import socket
import subprocess
import sys
import threading
import time

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
from quoter.serving.ray_serve import APP_NAME, DEPLOYMENT_NAME, REPLICA_HEADER, quoter_application
from quoter.serving.settings import EngineKind, ServeConfig, ServeEngineConfig
from tests.serving_fixtures import tiny_bundle

CONTEXT = {"left": "the cat", "right": "on the mat", "k": 3}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def port():
    """One local Ray cluster for the module, with Serve's HTTP proxy on a free loopback port."""
    ray.init(num_cpus=2, include_dashboard=False)
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


def kill_replica(replica: str) -> None:
    """Kill a replica's actor, as a crash of its process would."""
    ray.kill(ray.get_actor(f"SERVE_REPLICA::{APP_NAME}#{DEPLOYMENT_NAME}#{replica}", namespace="serve"))


def kill_a_replica_during(work, replicas, stop):
    """Run `work(number)` in two threads; once both replicas have answered (`replicas()`: who answered, in
    order), kill the one that answered last, let the work go on 3 s, then stop it; the victim, when it died, and
    the threads."""
    threads = [threading.Thread(target=work, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    while len(set(replicas())) < 2:
        time.sleep(0.05)
    victim = replicas()[-1]
    kill_replica(victim)
    killed_at = time.monotonic()
    time.sleep(3)
    stop.set()
    for thread in threads:
        thread.join()
    return victim, killed_at, threads


def answers_of_both(client: httpx.Client) -> dict[str, list[dict]]:
    """The answers to the same request by replica, asked until two replicas have answered."""
    answers: dict[str, list[dict]] = {}
    for _ in range(100):
        response = client.post("/recommend", json=CONTEXT)
        assert response.status_code == 200, response.text
        answers.setdefault(response.headers[REPLICA_HEADER], []).append(response.json())
        if len(answers) == 2:
            break
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


def test_when_a_replica_is_killed_the_other_keeps_answering(replicas):
    statuses: list[tuple[float, int, str | None]] = []
    stop = threading.Event()

    url = replicas()

    def ask(_: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.is_set():
                response = client.post("/recommend", json=CONTEXT)
                statuses.append((time.monotonic(), response.status_code, response.headers.get(REPLICA_HEADER)))

    victim, killed_at, clients = kill_a_replica_during(ask, lambda: [replica for _, _, replica in statuses], stop)
    after = [(status, replica) for at, status, replica in statuses if at > killed_at]
    # Only the requests the victim held when it died may fail; every later one is answered by another replica.
    failed = [status for status, _ in after if status != 200]
    assert len(after) > 20 and len(failed) <= len(clients), failed
    answered_late = [replica for status, replica in after[len(clients) :] if status == 200]
    assert answered_late and victim not in answered_late


def test_a_quote_added_through_one_replica_is_seen_by_every_following_request(replicas, postgres_url):
    with httpx.Client(base_url=replicas(postgres_url)) as client:
        added = client.post("/quotes", json={"quote": "curiosity killed the cat", "lang": "en"})
        assert added.status_code == 201, added.text
        quote_id, adder = added.json()["id"], added.headers[REPLICA_HEADER]
        answered_by = set()
        for _ in range(100):
            listed = client.get("/quotes", params={"q": "curiosity"})
            ranked = client.post("/recommend", json={**CONTEXT, "k": 100})
            assert [quote["id"] for quote in listed.json()["quotes"]] == [quote_id]
            assert quote_id in [result["id"] for result in ranked.json()["results"]]
            answered_by |= {listed.headers[REPLICA_HEADER], ranked.headers[REPLICA_HEADER]}
            if len(answered_by - {adder}) > 0:
                break
        assert answered_by - {adder}, "only the replica that added the quote answered"


def test_killing_a_replica_while_quotes_are_added_loses_no_acknowledged_add(replicas, postgres_url):
    url = replicas(postgres_url)
    acknowledged: dict[str, int] = {}
    answered: list[tuple[float, str]] = []
    stop = threading.Event()

    def add(writer: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for number in itertools.count():
                if stop.is_set():
                    return
                quote = f"saying {writer}-{number}"
                response = client.post("/quotes", json={"quote": quote, "lang": "en"})
                if response.status_code == 201:
                    acknowledged[quote] = response.json()["id"]
                    answered.append((time.monotonic(), response.headers[REPLICA_HEADER]))

    victim, killed_at, _ = kill_a_replica_during(add, lambda: [replica for _, replica in answered], stop)
    assert [replica for at, replica in answered if at > killed_at + 1 and replica != victim], "no add after the kill"
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
