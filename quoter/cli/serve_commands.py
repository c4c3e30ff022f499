"""`quoter serve` (the HTTP API and demo page) and `quoter batch` (recommendations for a file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from quoter.cli.options import RuntimeOption
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.serving.index_config import IndexConfig, IndexKind
from quoter.serving.micro_batching import BatchingConfig
from quoter.serving.runtime_config import ContextRuntime
from quoter.serving.schemas import MAX_BATCH
from quoter.serving.server_limits import ServerLimits, hosts_for_address, is_loopback

DEFAULT_BATCHING = BatchingConfig()
DEFAULT_LIMITS = ServerLimits()
API_KEY_ENV = "QUOTER_API_KEY"
API_KEY_FILE_ENV = "QUOTER_API_KEY_FILE"
STATE_ENV = "QUOTER_STATE"
# Half the cores: the event loop, tokenizer and any local clients need CPU too, and on a busy machine
# more intra-op threads than free cores make each encoder call many times slower, not faster.
DEFAULT_THREADS = max(1, (os.cpu_count() or 2) // 2)

Int8Option = Annotated[
    bool, typer.Option("--int8", help="Quantize the context encoder to int8: faster on CPU, scores differ slightly.")
]
IndexOption = Annotated[
    IndexKind, typer.Option("--index", help="Quote search: exact, or approximate (IVF) for very large quote sets.")
]
StateOption = Annotated[
    Optional[Path],
    typer.Option(
        envvar=STATE_ENV,
        file_okay=False,
        help="A writable folder for the live quote changes (DIR/LANG/), e.g. when bundles or quote sets are "
        "read-only. Default: the bundle folder for its own quotes, FILE.live/ for a quote set FILE.",
    ),
]
ThreadsOption = Annotated[
    int, typer.Option(min=1, help="CPU threads per encoder call and search (torch, ONNX Runtime, faiss).")
]


def set_threads(threads: int) -> None:
    """Set how many threads torch (encoders, softmax, exact search), ONNX Runtime (its sessions take torch's
    count) and faiss (IVF search) use inside one call."""
    import faiss
    import torch

    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)


def read_api_key(api_key: str | None, api_key_file: Path | None) -> str | None:
    """The API key given as itself or as a file that holds it (surrounding whitespace dropped); None for none."""
    if api_key and api_key_file:
        raise QuoterError(f"give the API key once: --api-key ({API_KEY_ENV}) or --api-key-file ({API_KEY_FILE_ENV})")
    if api_key_file is None:
        return api_key or None
    try:
        key = api_key_file.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise InputError(f"cannot read the API key file: {error.strerror}", path=api_key_file) from None
    except UnicodeDecodeError:
        raise InputError("the API key file is not UTF-8 text", path=api_key_file) from None
    if not key:
        raise InputError("the API key file is empty", path=api_key_file)
    return key


def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 for every interface.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    bundle: Annotated[
        Optional[list[str]],
        typer.Option(
            "--bundle",
            metavar="LANG=DIR",
            help="A bundle folder to host, e.g. en=models/en; repeat for more languages. Default: a zero-shot "
            "bundle over the built-in quote bank per language.",
        ),
    ] = None,
    quotes: Annotated[
        Optional[list[str]],
        typer.Option(
            "--quotes",
            metavar="LANG=FILE",
            help="A quote set written by `quoter encode` with that language's bundle, served instead of the "
            "bundle's own quotes (repeatable).",
        ),
    ] = None,
    state: StateOption = None,
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
    allowed_host: Annotated[
        Optional[list[str]],
        typer.Option(
            "--allowed-host",
            help="A Host header value to answer (repeatable; * for any), e.g. a proxy's name. Default: the "
            "loopback names on loopback, any on 0.0.0.0, else the --host address. Others get 400.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option(min=1, help="The largest request body, in bytes (413 beyond).")
    ] = DEFAULT_LIMITS.max_body_bytes,
    max_queue: Annotated[
        int,
        typer.Option(min=MAX_BATCH, help="Contexts that may wait for the model; more get 503 with Retry-After."),
    ] = DEFAULT_LIMITS.max_queued_contexts,
    keep_alive: Annotated[
        int,
        typer.Option(
            min=1, help="Seconds an idle connection stays open; keep it above the clients' and proxies' idle timeouts."
        ),
    ] = DEFAULT_LIMITS.keep_alive_s,
    runtime: RuntimeOption = ContextRuntime.AUTO,
    int8: Int8Option = False,
    index: IndexOption = IndexKind.EXACT,
    max_batch: Annotated[
        int, typer.Option(min=1, help="Concurrent requests encoded together at most.")
    ] = DEFAULT_BATCHING.max_batch,
    max_wait_ms: Annotated[
        float, typer.Option(min=0, help="How long a batch waits for more requests, in milliseconds.")
    ] = DEFAULT_BATCHING.max_wait_ms,
    max_batch_tokens: Annotated[
        int, typer.Option(min=1, help="Context tokens encoded together at most, so that one encoder call stays short.")
    ] = DEFAULT_BATCHING.max_batch_tokens,
    threads: ThreadsOption = DEFAULT_THREADS,
) -> None:
    """Serve recommendations over HTTP (API docs at /docs, demo page at /)."""
    import uvicorn

    from quoter.serving.app import AppConfig, create_app
    from quoter.serving.hosting import default_bundles, load_hosted
    from quoter.serving.recommender import Recommender, RecommenderConfig

    batching = BatchingConfig(max_batch=max_batch, max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens)
    config = RecommenderConfig(runtime=runtime, int8=int8, index=IndexConfig(kind=index), batching=batching)
    if bundle and lang:
        raise QuoterError("--lang chooses among the built-in bundles; with --bundle, host only the ones you give")
    if quotes and not bundle:
        raise QuoterError("--quotes needs the --bundle whose quote encoder made the quote set")
    key = read_api_key(api_key, api_key_file)
    limits = ServerLimits(
        max_body_bytes=max_body_bytes,
        max_queued_contexts=max_queue,
        allowed_hosts=tuple(allowed_host or hosts_for_address(host)),
        keep_alive_s=keep_alive,
    )
    set_threads(threads)
    if bundle:
        recommenders = load_hosted(bundle, quotes or [], config, state, lambda line: typer.echo(line, err=True))
    else:
        languages = list(dict.fromkeys(lang or list(Language)))
        names = ", ".join(language.value for language in languages)
        typer.echo(f"no --bundle given: building zero-shot bundles for {names}", err=True)
        recommenders = [Recommender(b, config) for b in default_bundles(languages)]
    app = create_app(recommenders, AppConfig(api_key=key, limits=limits))
    hosted = ", ".join(f"{r.language.value} ({len(r.quotes):,} quotes, {r.runtime.name})" for r in recommenders)
    typer.echo(f"hosting {hosted} on http://{host}:{port} (API docs at /docs)", err=True)
    typer.echo(f"answering Host: {', '.join(limits.allowed_hosts)} (--allowed-host to change)", err=True)
    if key is None and not is_loopback(host):
        typer.secho(
            f"WARNING: no API key and listening on {host}: anyone who can reach port {port} can add and remove "
            f"quotes. Set {API_KEY_ENV} or {API_KEY_FILE_ENV}, or listen on 127.0.0.1.",
            err=True,
            fg=typer.colors.RED,
            bold=True,
        )
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=limits.keep_alive_s)


def batch_command(
    input: Annotated[
        Path, typer.Option("--input", help='JSONL ({"left", "right", "id"}) or TSV (left<TAB>right, or QuoteR).')
    ],
    output: Annotated[Path, typer.Option(help="JSONL file of the top k quotes per context, in input order.")],
    bundle: Annotated[
        Optional[Path], typer.Option(help="Bundle folder. Default: the built-in default of --lang's language.")
    ] = None,
    quotes: Annotated[
        Optional[Path],
        typer.Option(help="A quote set written by `quoter encode` with the bundle. Default: the bundle's own quotes."),
    ] = None,
    lang: Annotated[
        Optional[Language], typer.Option(help="Without --bundle: the language of the built-in default to use.")
    ] = None,
    state: StateOption = None,
    k: Annotated[int, typer.Option(min=1, help="Quotes per context.")] = 10,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the complete lines of OUTPUT.partial from a run that stopped.")
    ] = False,
    left_only: Annotated[bool, typer.Option("--left-only", help="Drop the right context (autocomplete).")] = False,
    runtime: RuntimeOption = ContextRuntime.AUTO,
    int8: Int8Option = False,
    index: IndexOption = IndexKind.EXACT,
    threads: ThreadsOption = DEFAULT_THREADS,
) -> None:
    """Recommend quotes for every context of a file."""
    from quoter.serving.batch_job import BatchConfig, read_contexts, run_batch
    from quoter.serving.hosting import default_bundles, hosted_recommender
    from quoter.serving.recommender import Recommender, RecommenderConfig

    if (bundle is None) == (lang is None):
        raise QuoterError("give --bundle DIR, or --lang LANG for the built-in default, not both")
    if quotes is not None and bundle is None:
        raise QuoterError("--quotes needs the --bundle whose quote encoder made the quote set")
    contexts = read_contexts(input)
    set_threads(threads)
    config = RecommenderConfig(runtime=runtime, int8=int8, index=IndexConfig(kind=index))
    if bundle is None:
        recommender = Recommender(default_bundles([lang])[0], config)
    else:
        # Quotes a server added to or removed from the served set count here too.
        recommender = hosted_recommender(bundle, config, quotes, state)
    typer.echo(f"context encoder runtime: {recommender.runtime.describe()}", err=True)
    ranked = run_batch(recommender, contexts, output, BatchConfig(k=k, left_only=left_only), resume)
    typer.echo(f"{output}: {len(contexts):,} contexts ({ranked:,} ranked now)", err=True)
