"""`quoter serve` (the HTTP API and demo page) and `quoter batch` (recommendations for a file)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from quoter.batch.settings import BatchConfig
from quoter.cli.options import QUOTE_SET_HELP, CommandSettings
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.serving.http.server_limits import is_loopback
from quoter.serving.settings import EngineKind, ServeConfig, complete_serve_config

if TYPE_CHECKING:
    from fastapi import FastAPI

    from quoter.serving.http.app import AppConfig
    from quoter.serving.recommender import Recommender

API_KEY_ENV = "QUOTER_API_KEY"
API_KEY_FILE_ENV = "QUOTER_API_KEY_FILE"
STATE_ENV = "QUOTER_STATE"
STORE_ENV = "QUOTER_STORE"
# What ranks, with the same options in both commands.
RANKING_FLAGS = {"runtime": None, "int8": None, "index.kind": "--index", "threads": None}
SERVE = CommandSettings(
    ServeConfig,
    "batching.max_batch=16",
    "YAML settings of the server.",
    {
        "host": None,
        "port": None,
        "limits.allowed_hosts": "--allowed-host",
        "limits.max_body_bytes": None,
        "limits.max_queued_contexts": "--max-queue",
        "limits.keep_alive_s": "--keep-alive",
        "limits.header_timeout_s": "--header-timeout",
        "limits.body_timeout_s": "--body-timeout",
        **RANKING_FLAGS,
        "batching.max_batch": None,
        "batching.max_wait_ms": None,
        "batching.max_batch_tokens": None,
        "engine.kind": "--engine",
        "engine.address": None,
        "engine.replicas": None,
        "engine.autoscale": None,
    },
    complete=complete_serve_config,
)
BATCH = CommandSettings(
    BatchConfig,
    "batch.k=20",
    "YAML settings of the run.",
    {
        "batch.k": None,
        "batch.left_only": None,
        **RANKING_FLAGS,
        "engine.kind": "--engine",
        "engine.address": None,
        "engine.workers": None,
        "engine.gpus_per_worker": None,
    },
)


def to_stderr(line: str) -> None:
    """Tell the operator `line` on stderr, where the commands' notes go (stdout may be the output)."""
    typer.echo(line, err=True)


def language_paths_option(flag: str, metavar: str, help: str) -> Any:
    """A repeatable LANG=PATH option of `quoter serve` (see hosting.parse_language_spec)."""
    return Annotated[Optional[list[str]], typer.Option(flag, metavar=metavar, help=help)]


HostedOption = language_paths_option(
    "--bundle",
    "LANG=DIR",
    "A bundle folder to host, e.g. en=models/en; repeat for more languages. Default: a zero-shot bundle over the "
    "built-in quote bank per language.",
)
HostedQuotesOption = language_paths_option(
    "--quotes",
    "LANG=FILE",
    "A quote set written by `quoter encode` with that language's bundle, served instead of the bundle's own quotes "
    "(repeatable).",
)
StateOption = Annotated[
    Optional[Path],
    typer.Option(
        envvar=STATE_ENV,
        file_okay=False,
        help="A writable folder for the live quote changes (DIR/LANG/), e.g. when bundles or quote sets are "
        "read-only. Default: the bundle folder for its own quotes, FILE.live/ for a quote set FILE, and "
        "$XDG_STATE_HOME/quoter (~/.local/state/quoter) for the built-in default.",
    ),
]
StoreOption = Annotated[
    Optional[str],
    typer.Option(
        envvar=STORE_ENV,
        metavar="URL",
        help="A PostgreSQL database (postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE) that keeps the live quote "
        "sets, one per language, shared with every server and batch run given it; instead of --state. Prefer the "
        "environment variable when the URL holds a password: a command line shows in the process list.",
    ),
]


def check_store(store: str | None, state: Path | None) -> None:
    """Refuse an empty --store, and --store with --state: the live quote sets are kept in one place."""
    if store is not None and not store.strip():
        raise QuoterError(f"--store ({STORE_ENV}) is empty; give a postgresql:// URL, or unset it")
    if store is not None and state is not None:
        raise QuoterError("--store and --state exclude each other: the live quote sets are kept in one place")


def set_threads(threads: int) -> None:
    """Set how many threads torch (encoders, softmax, exact search), ONNX Runtime (its sessions take torch's
    count) and faiss (IVF search) use inside one call."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)


def read_api_key(api_key: str | None, api_key_file: Path | None) -> str | None:
    """The API key given as itself or as a file that holds it (surrounding whitespace dropped); None for none.
    A key given empty is an error, not no key: it would leave adding and removing quotes open."""
    # Click takes an empty environment variable for an unset one.
    if api_key is None and os.environ.get(API_KEY_ENV) == "":
        api_key = ""
    if api_key is not None:
        api_key = api_key.strip()
        if not api_key:
            raise QuoterError(
                f"the API key is empty (--api-key or {API_KEY_ENV}); give a key, or unset it to serve without one"
            )
    if api_key_file is None and os.environ.get(API_KEY_FILE_ENV) == "":
        raise QuoterError(f"{API_KEY_FILE_ENV} is empty; name the file that holds the API key, or unset it")
    if api_key and api_key_file:
        raise QuoterError(f"give the API key once: --api-key ({API_KEY_ENV}) or --api-key-file ({API_KEY_FILE_ENV})")
    if api_key_file is None:
        return api_key
    try:
        key = api_key_file.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise InputError(f"cannot read the API key file: {error.strerror}", path=api_key_file) from None
    except UnicodeDecodeError:
        raise InputError("the API key file is not UTF-8 text", path=api_key_file) from None
    if not key:
        raise InputError("the API key file is empty", path=api_key_file)
    return key


@SERVE.command
def serve_command(
    bundle: HostedOption = None,
    quotes: HostedQuotesOption = None,
    state: StateOption = None,
    store: StoreOption = None,
    lang: Annotated[
        Optional[list[Language]],
        typer.Option("--lang", help="Without --bundle: host only these built-in languages (repeatable)."),
    ] = None,
    api_key: Annotated[
        Optional[str],
        typer.Option(
            envvar=API_KEY_ENV,
            help="Key that adding and removing quotes needs (header X-API-Key). Prefer the environment variable "
            "or --api-key-file: a key on the command line shows in the process list.",
        ),
    ] = None,
    api_key_file: Annotated[
        Optional[Path],
        typer.Option(envvar=API_KEY_FILE_ENV, dir_okay=False, help="A file that holds the API key."),
    ] = None,
    *,
    settings: ServeConfig,
) -> None:
    """Serve recommendations over HTTP (API docs at /docs, demo page at /)."""
    if bundle and lang:
        raise QuoterError("--lang chooses among the built-in bundles; with --bundle, host only the ones you give")
    if quotes and not bundle:
        raise QuoterError("--quotes needs the --bundle whose quote encoder made the quote set")
    key = read_api_key(api_key, api_key_file)
    check_store(store, state)
    languages = list(dict.fromkeys(lang or list(Language)))
    hosted = Hosted(bundle or [], quotes or [], languages, state, store)
    if settings.engine.kind is EngineKind.RAY:
        serve_with_ray(hosted, key, settings)
        return
    import uvicorn

    from quoter.serving.hosting import can_save_changes, default_state_folder, hold_quote_sets
    from quoter.serving.http.app import create_app
    from quoter.serving.http.head_timeout import server_protocol

    set_threads(settings.threads)
    if not bundle:
        names = ", ".join(language.value for language in languages)
        typer.echo(
            f"no --bundle given: the built-in default for {names}, learning from the bank's usage examples "
            "(the first start takes a few minutes; what is learned is cached)",
            err=True,
        )
    recommenders = hosted.recommenders(settings)
    hold_quote_sets(recommenders)
    if not bundle:
        saved_in = state or default_state_folder()
        if store is not None:  # not echoed: the URL may hold a password
            typer.echo("quotes added or removed are saved in the PostgreSQL database of --store", err=True)
        else:
            typer.echo(f"quotes added or removed are saved in {saved_in}/LANG (--state DIR to change)", err=True)
        if store is None and not all(can_save_changes(saved_in / language.value) for language in languages):
            typer.echo(f"{saved_in} is read-only: adding or removing quotes needs a writable --state DIR", err=True)
    limits = settings.limits
    app = create_app(recommenders, app_config(key, settings))
    host, port = settings.host, settings.port
    names = ", ".join(f"{r.language.value} ({len(r.quotes):,} quotes, {r.runtime.name})" for r in recommenders)
    typer.echo(f"hosting {names} on http://{host}:{port} (API docs at /docs)", err=True)
    typer.echo(f"answering Host: {', '.join(limits.allowed_hosts)} (--allowed-host to change)", err=True)
    tell_who_may_change_quotes(key, settings)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        timeout_keep_alive=limits.keep_alive_s,
        http=server_protocol(limits.header_timeout_s),
    )


def app_config(key: str | None, settings: ServeConfig) -> AppConfig:
    """The app's config, the same in this process and in a Ray Serve replica: without a key, quote changes are
    taken only by a server that listens on loopback. The address decides, not each client's: behind a proxy on
    the same machine every client looks local."""
    from quoter.serving.http.app import AppConfig

    return AppConfig(api_key=key, keyless_writes=is_loopback(settings.host), limits=settings.limits)


def tell_who_may_change_quotes(key: str | None, settings: ServeConfig) -> None:
    """Tell the operator, at start, who may add and remove quotes on a server without a key (see app_config)."""
    if key is not None:
        return
    if is_loopback(settings.host):
        to_stderr(f"no API key: anyone on this machine can add and remove quotes (set {API_KEY_ENV} to require a key)")
    else:
        to_stderr(
            f"no API key: quote changes are refused (403), as the server listens beyond loopback on {settings.host}; "
            f"set {API_KEY_ENV} or {API_KEY_FILE_ENV} to take them with the key"
        )


@dataclass(frozen=True)
class Hosted:
    """What `quoter serve` hosts: the bundles given as LANG=DIR over their own quotes or the quote sets given as
    LANG=FILE, else the built-in default of `languages`; the live changes go to the state folder, or to the
    PostgreSQL database `store`."""

    bundles: list[str]
    quotes: list[str]
    languages: list[Language]
    state: Path | None
    store: str | None

    def recommenders(self, settings: ServeConfig) -> list[Recommender]:
        """The recommenders, built now (in this process, or in a Ray Serve replica)."""
        from quoter.serving.hosting import default_recommenders, load_hosted

        if self.bundles:
            return load_hosted(self.bundles, self.quotes, settings, self.state, to_stderr, self.store)
        return default_recommenders(self.languages, settings, self.state, to_stderr, self.store)


def serve_with_ray(hosted: Hosted, key: str | None, settings: ServeConfig) -> None:
    """`quoter serve --engine ray`: the app that `hosted_app` builds, in each Ray Serve replica."""
    _, most = settings.engine.scale_range()
    if most > 1 and hosted.store is None:
        raise QuoterError(
            f"{most} replicas would each keep their own copy of the quote set, and a quote added through one would "
            "be missing from the others: give --store postgresql://..., or --replicas 1"
        )
    from quoter.serving.ray_serve import serve_on_ray

    if not hosted.bundles:
        to_stderr("no --bundle given: each replica serves the built-in default (the first start takes minutes)")
    tell_who_may_change_quotes(key, settings)
    serve_on_ray(functools.partial(hosted_app, hosted, key, settings), settings, to_stderr)


def hosted_app(hosted: Hosted, key: str | None, settings: ServeConfig) -> FastAPI:
    """The app `quoter serve` serves, built where it runs (in a Ray Serve replica)."""
    from quoter.serving.http.app import create_app

    set_threads(settings.threads)
    return create_app(hosted.recommenders(settings), app_config(key, settings))


@BATCH.command
def batch_command(
    input: Annotated[
        Path,
        typer.Option(
            "--input", help='JSONL ({"left", "right", "id"}), TSV (left<TAB>right, or QuoteR) or Parquet (by suffix).'
        ),
    ],
    output: Annotated[Path, typer.Option(help="JSONL file of the top k quotes per context, in input order.")],
    bundle: Annotated[
        Optional[Path], typer.Option(help="Bundle folder. Default: the built-in default of --lang's language.")
    ] = None,
    quotes: Annotated[Optional[Path], typer.Option(help=QUOTE_SET_HELP)] = None,
    lang: Annotated[
        Optional[Language], typer.Option(help="Without --bundle: the language of the built-in default to use.")
    ] = None,
    state: StateOption = None,
    store: StoreOption = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Keep the complete lines of OUTPUT.partial (with ray, the shards in OUTPUT.shards/) of a run that "
            "stopped.",
        ),
    ] = False,
    *,
    settings: BatchConfig,
) -> None:
    """Recommend quotes for every context of a file."""
    if bundle is None and lang is None:
        raise QuoterError("no model given: give --bundle DIR, or --lang LANG for the built-in default")
    if bundle is not None and lang is not None:
        raise QuoterError("--bundle and --lang exclude each other: give only one of them")
    if quotes is not None and bundle is None:
        raise QuoterError("--quotes needs the --bundle whose quote encoder made the quote set")
    check_store(store, state)
    from quoter.batch.contexts import read_contexts
    from quoter.batch.job import check_batch_output, run_batch
    from quoter.batch.ray_job import import_ray, run_ray_batch, worker_config

    check_batch_output(output, input)
    contexts = read_contexts(input, settings.batch.left_only)
    on_ray = settings.engine.kind is EngineKind.RAY
    if on_ray:
        import_ray()  # a missing Ray is said before the model loads
    # Paths, not loaded objects: each Ray worker builds its own recommender from them.
    build = functools.partial(batch_recommender, bundle, quotes, lang, state, settings, store)
    recommender = build()
    typer.echo(f"context encoder runtime: {recommender.runtime.describe()}", err=True)
    if on_ray:
        workers = functools.partial(batch_recommender, bundle, quotes, lang, state, worker_config(settings), store)
        ranked = run_ray_batch(recommender, workers, contexts, output, settings, resume)
    else:
        ranked = run_batch(recommender, contexts, output, settings.batch, resume)
    typer.echo(f"{output}: {len(contexts):,} contexts ({ranked:,} ranked now)", err=True)


def batch_recommender(
    bundle: Path | None,
    quotes: Path | None,
    lang: Language | None,
    state: Path | None,
    settings: BatchConfig,
    store: str | None = None,
) -> Recommender:
    """The recommender `quoter batch` ranks with, built where it runs (in this process, or in each Ray
    worker): over the bundle in `bundle` and its quote set `quotes`, else over the built-in default of `lang`,
    with the live changes of the state folder or of the PostgreSQL database `store`."""
    # Imported only now: torch takes seconds to import, which a bad input or output should not wait for.
    from quoter.serving.hosting import default_recommenders, hosted_recommender

    set_threads(settings.threads)
    # Quotes a server added to or removed from the served set count here too.
    if bundle is None:
        return default_recommenders([lang], settings, state, to_stderr, store)[0]
    return hosted_recommender(bundle, settings, quotes, state, database=store)
