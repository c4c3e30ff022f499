"""`quoter serve --engine ray`: the server's app on Ray Serve, in several replicas.

Each replica is a Ray actor, a process of its own, that builds the whole app itself from a builder the command
gives it: its recommenders (context runtime, index, quote set) and the FastAPI app over them, served as the
replica's ingress, so the endpoints, limits, demo page and OpenAPI are those of one process. Every response
names the replica that answered (header X-Quoter-Replica). Concurrent requests are batched inside each replica
by the app's own MicroBatcher, which answered more requests a second than Ray Serve's @serve.batch did.

Ray's HTTP proxy, not uvicorn, owns the connections: it keeps idle ones open for limits.keep_alive_s, and has
no deadline for a request's head (limits.header_timeout_s does not apply). The Host check, the body size and
the body's deadline stay the app's, in the replica. A replica takes as many requests at once as its queue
holds contexts; beyond that Ray's proxy queues them, and the app's own queue answers 503 as one process does.

A replica that stops while it holds a request (killed, crashed) leaves the request unanswered: Ray's proxy
answers only a timeout (408) or its own back pressure (503) itself, and lets any other failure of the
replica, ActorDiedError among them, end the request with no response at all (ray/serve/_private/proxy.py,
send_request_to_replica; http_util.send_http_response_on_exception), which uvicorn, under the proxy, turns
into a plain-text 500. So the proxy is wrapped in _AnswerLostRequests, through the hook Ray Serve reads in the
proxy's process, $RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH, set in the Ray job's environment (RUNTIME_ENV),
which Serve's controller and then its proxies inherit: such a request gets the API's JSON 503 with
Retry-After. Ray resends only a request that no replica has taken yet; this one the replica may have acted
on, so the client resends it, which is safe: adding a listed quote again answers with its id. A replica that
stops after it began its response leaves the response cut short: its status line is sent, and the connection
is closed. On a cluster where Serve already runs (--address), its proxy stays as it was started, and so does
how it answers.

Ray is imported only here, and only when the ray engine is chosen; without it, that is a one-line error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from fastapi import FastAPI, status
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quoter.errors import QuoterError
from quoter.serving.http.api_errors import error_response
from quoter.serving.settings import ServeConfig

REPLICA_HEADER = "X-Quoter-Replica"
APP_NAME = "quoter"
DEPLOYMENT_NAME = "Quoter"
INSTALL_HINT = "pip install 'quoter[scale]'"
# The Ray job's environment: Serve's controller inherits it, and its HTTP proxies from it; each proxy calls the
# function that the variable names, in its own process, for the middlewares to wrap itself in.
RUNTIME_ENV = {"env_vars": {"RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": f"{__name__}.proxy_middlewares"}}
# Another replica takes a resent request at once; with none left, Ray's proxy holds it until one is back.
LOST_REQUEST_RETRY_AFTER_S = 1


def import_serve() -> ModuleType:
    """ray.serve, or a one-line error that says how to install it."""
    try:
        from ray import serve
    except ImportError:
        raise QuoterError(f"the ray engine needs Ray Serve: {INSTALL_HINT}") from None
    return serve


class _NamedReplica:
    """ASGI middleware that names the replica in every HTTP response, so that an operator (or a client) can tell
    which replica answered a request."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.lower().encode(), name.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_named)


class _AnswerLostRequests:
    """ASGI middleware around Ray Serve's HTTP proxy: a request that the proxy ends without a response, as it
    does when the replica holding it stops, gets the API's JSON 503 with Retry-After."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, receive, send_watched)
        if not started:
            # Where the client itself went away (the proxy's 499), uvicorn sends this nowhere.
            lost = error_response(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "the server replica that took the request stopped before it answered; send it again (a quote "
                "change may have been made: adding the same quote again answers with its id)",
                "replica_lost",
                headers={"Retry-After": str(LOST_REQUEST_RETRY_AFTER_S)},
            )
            await lost(scope, receive, send)


def proxy_middlewares() -> list[Middleware]:
    """The middlewares that Ray Serve's HTTP proxy wraps itself in (named in RUNTIME_ENV)."""
    return [Middleware(_AnswerLostRequests)]


class QuoterReplica:
    """One replica: builds the app in its own process (Ray Serve calls __serve_build_asgi_app__ once it runs)."""

    def __init__(self, build_app: Callable[[], FastAPI]) -> None:
        self.build_app = build_app

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = self.build_app()
        replica = import_serve().get_replica_context().replica_id.unique_id
        app.add_middleware(_NamedReplica, name=replica)
        return app


def deployment_options(settings: ServeConfig) -> dict[str, Any]:
    """Ray Serve's options for the replicas: how many, and what each asks of the cluster."""
    engine = settings.engine
    options: dict[str, Any] = {
        # Each replica's encoder calls use `threads` cores; Ray places replicas where that many are free.
        "ray_actor_options": {"num_cpus": settings.threads},
        # Every request holds at least one context, so the app's own queue limit (503) comes first.
        "max_ongoing_requests": settings.limits.max_queued_contexts,
    }
    low, high = engine.scale_range()
    if engine.autoscale is None:
        options["num_replicas"] = low
    else:
        # More replicas once each has more than a full batch under way: a full batch is as much as a replica
        # encodes in one call, and requests beyond it wait for the next one.
        target = settings.batching.max_batch
        options["autoscaling_config"] = {"min_replicas": low, "max_replicas": high, "target_ongoing_requests": target}
    return options


def quoter_application(build_app: Callable[[], FastAPI], settings: ServeConfig) -> Any:
    """The Ray Serve application whose replicas each serve the app `build_app` makes (a picklable callable, run
    in each replica), as many as the settings' engine asks for."""
    serve = import_serve()
    replica = serve.ingress()(QuoterReplica)
    return serve.deployment(name=DEPLOYMENT_NAME, **deployment_options(settings))(replica).bind(build_app)


def start_serve(settings: ServeConfig) -> None:
    """Connect to the Ray cluster at the engine's address (none: start a local one) and start Ray Serve's HTTP
    proxy on the settings' host and port, wrapped in proxy_middlewares, unless Serve already runs there (then its
    proxy is kept as it is)."""
    serve = import_serve()
    import ray

    ray.init(address=settings.engine.address, include_dashboard=False, logging_level="warning", runtime_env=RUNTIME_ENV)
    http = {"host": settings.host, "port": settings.port, "keep_alive_timeout_s": settings.limits.keep_alive_s}
    serve.start(http_options=http, logging_config=quiet_logging())


def quiet_logging() -> dict[str, Any]:
    """Ray Serve's logging for the server: warnings and errors, without a line per request."""
    return {"log_level": "WARNING", "enable_access_log": False}


def serve_on_ray(build_app: Callable[[], FastAPI], settings: ServeConfig, tell: Callable[[str], None]) -> None:
    """Serve the app `build_app` makes in each replica on Ray Serve until interrupted; then stop the local
    cluster, or remove the application from the cluster at the engine's address."""
    serve = import_serve()
    import ray

    start_serve(settings)
    try:
        try:
            serve.run(quoter_application(build_app, settings), name=APP_NAME, logging_config=quiet_logging())
        except RuntimeError:
            raise QuoterError(f"the replicas did not start: {why_replicas_failed(serve)}") from None
        low, high = settings.engine.scale_range()
        count = str(low) if low == high else f"{low} to {high}"
        replicas = "1 Ray Serve replica" if high == 1 else f"{count} Ray Serve replicas"
        tell(f"serving on http://{settings.host}:{settings.port} with {replicas} (API docs at /docs)")
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        if settings.engine.address is None:
            serve.shutdown()
            ray.shutdown()
        else:
            serve.delete(APP_NAME)


def why_replicas_failed(serve: ModuleType) -> str:
    """Why the replicas failed to start: the last line of the error that the last one raised, without the
    error's class (the traceback is in the log above)."""
    status = serve.status().applications[APP_NAME].deployments[DEPLOYMENT_NAME]
    lines = [line.strip() for line in status.message.splitlines() if line.strip()]
    if not lines:
        return "see the log above"
    name, sep, message = lines[-1].partition(": ")
    return message if sep and " " not in name else lines[-1]
