"""`quoter batch --engine ray`: the contexts of a file ranked by a pool of Ray workers (Ray Data), block by block.

The contexts are cut into blocks of engine.block contexts. A worker builds its own recommender once, from
paths (bundle, quote set, state folder: on a cluster its nodes must share them), ranks each block it is
given in the single-process run's steps with its code (quoter.batch.job.ranked_lines) and writes the block's
lines to its shard, OUTPUT.shards/NNNNN.jsonl, whole or not at all. Once every block has its shard, the
shards are merged in order into OUTPUT, renamed into place once complete, and the shard folder is removed:
the output is byte for byte the single-process run's. The shard folder holds the run's record
(quoter.batch.resume) from its start, so --resume ranks only the blocks without a shard and refuses the
shards of another run. Ray is imported only here, when such a run starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from quoter.atomic_files import write_folder_atomic, write_json_atomic, write_text_atomic
from quoter.batch.contexts import BatchContext
from quoter.batch.job import ranked_lines, shard_folder
from quoter.batch.resume import check_resumable, run_record
from quoter.batch.settings import BatchConfig, BatchOutputConfig
from quoter.errors import QuoterError
from quoter.progress import progress_bar

if TYPE_CHECKING:  # torch comes with it: the command checks its input and output before it waits for that
    from quoter.serving.recommender import Recommender

RECORD_NAME = "run.json"
# The output grows here, inside the shard folder, so that a merge cut short leaves nothing beside OUTPUT.
MERGED_NAME = "merged.tmp"
RESUME_HINT = "the finished shards are kept: fix that, then run the same command with --resume to go on"


def shard_path(shards: Path, block: int) -> Path:
    """The shard of block number `block` (from 0) in the shard folder `shards`."""
    return shards / f"{block:05d}.jsonl"


def run_ray_batch(
    recommender: Recommender,
    build: Callable[[], Recommender],
    contexts: Sequence[BatchContext],
    output: str | Path,
    config: BatchConfig,
    resume: bool = False,
    progress: bool = True,
) -> int:
    """Write the top k quotes of every context to `output` as run_batch does, ranked by config.engine.workers
    Ray workers that each call `build` once for a recommender like `recommender` (the one the run record
    describes); return how many contexts this run ranked (fewer than all when it resumed)."""
    ray = import_ray()
    output = Path(output)
    shards = shard_folder(output)
    record = {**run_record(recommender, contexts, config.batch.k, config.batch.left_only), "block": config.engine.block}
    if resume and shards.exists():
        check_resumable(shards, record, shards / RECORD_NAME)
    else:
        # An older run's shards go only once the new folder holds this run's record.
        write_folder_atomic(shards, lambda folder: write_json_atomic(folder / RECORD_NAME, record))
    size = config.engine.block
    blocks = [contexts[begin : begin + size] for begin in range(0, len(contexts), size)]
    pending = [number for number in range(len(blocks)) if not shard_path(shards, number).exists()]
    if pending:
        done = len(contexts) - sum(len(blocks[number]) for number in pending)
        with progress_bar(total=len(contexts), initial=done, unit="context", enabled=progress) as bar:
            # Closed at once when the run stops early (an error, ^C), not when the garbage collector gets to it:
            # that shuts Ray Data's execution down, and its workers give their CPUs back.
            ranked_blocks = _ranked_blocks(ray, build, {number: blocks[number] for number in pending}, shards, config)
            with contextlib.closing(ranked_blocks):
                for ranked in ranked_blocks:
                    bar.update(ranked)
    _merge(shards, len(blocks), output)
    return sum(len(blocks[number]) for number in pending)


def worker_config(config: BatchConfig) -> BatchConfig:
    """The settings a Ray worker ranks with: on the GPU Ray gives it when it takes some (--gpus-per-worker),
    which it then sees as its only one."""
    return replace(config, device="cuda") if config.engine.gpus_per_worker else config


def import_ray() -> ModuleType:
    """Ray, with Ray Data; without it, the one-line error that says how to install it."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise QuoterError("--engine ray needs Ray: pip install 'quoter[scale]'") from None
    return ray


def _ranked_blocks(
    ray: ModuleType,
    build: Callable[[], Recommender],
    blocks: dict[int, Sequence[BatchContext]],
    shards: Path,
    config: BatchConfig,
) -> Iterator[int]:
    """Rank `blocks` (by number) into their shards on a Ray cluster (config.engine.address, else a local one
    started for the run, or the one this process already joined); yield each block's count of contexts as
    its shard is written."""
    engine = config.engine
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=engine.address, include_dashboard=False, logging_level=logging.WARNING)
        except (ConnectionError, ValueError) as error:
            raise QuoterError(f"cannot join the Ray cluster at {engine.address}: {error}") from None
    try:
        _check_resources(ray.cluster_resources(), config)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the run's own bar counts contexts
        # Ray Data's notes (its bars switched off, each execution's start and end) are no news to the operator.
        logging.getLogger("ray.data").setLevel(logging.ERROR)
        rows = [{"block": number, "contexts": pickle.dumps(list(block))} for number, block in blocks.items()]
        # A Ray block per row: each block of contexts is a task of its own, for any free worker.
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            BlockRanker,
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=engine.workers),
            fn_constructor_kwargs={"build": build, "config": config.batch, "shards": str(shards)},
            num_cpus=config.threads,
            num_gpus=engine.gpus_per_worker or None,
        )
        for row in dataset.iter_rows():
            if row["error"]:
                raise QuoterError(f"{row['error']}; {RESUME_HINT}")
            yield int(row["contexts"])
    finally:
        if started:
            ray.shutdown()


def _check_resources(cluster: dict[str, float], config: BatchConfig) -> None:
    """Refuse workers the cluster cannot hold all at once: Ray would wait for them for ever."""
    engine = config.engine
    needs = (("CPU", config.threads, "--threads"), ("GPU", engine.gpus_per_worker, "--gpus-per-worker"))
    for name, each, option in needs:
        if each * engine.workers > cluster.get(name, 0):
            raise QuoterError(
                f"--workers {engine.workers} with {option} {each:g} need {each * engine.workers:g} {name}s; the Ray "
                f"cluster has {cluster.get(name, 0):g}: give fewer workers or fewer {option}"
            )


class BlockRanker:
    """A Ray worker: builds its recommender once, then ranks each block it is given into the block's shard.
    What the user can fix (a missing bundle, a full disk) comes back as the row's error, for the command to
    say in one line."""

    def __init__(self, build: Callable[[], Recommender], config: BatchOutputConfig, shards: str) -> None:
        self.config = config
        self.shards = Path(shards)
        self.recommender: Recommender | None = None
        self.error = ""
        try:
            self.recommender = build()
        except QuoterError as error:
            self.error = str(error)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rank the one block of `batch` into its shard; its count of contexts, and the error if it failed."""
        (number,) = batch["block"]
        contexts = pickle.loads(batch["contexts"][0])
        error = self.error if self.recommender is None else self._rank(self.recommender, int(number), contexts)
        return {"contexts": np.array([len(contexts)]), "error": np.array([error])}

    def _rank(self, recommender: Recommender, number: int, contexts: list[BatchContext]) -> str:
        step = self.config.chunk
        try:
            text = "".join(
                ranked_lines(recommender, contexts[begin : begin + step], self.config)
                for begin in range(0, len(contexts), step)
            )
            write_text_atomic(shard_path(self.shards, number), text)
        except QuoterError as error:
            return str(error)
        return ""


def _merge(shards: Path, count: int, output: Path) -> None:
    """Join the `count` shards, in order, into `output`, renamed into place once complete; then remove the
    shard folder."""
    merged = shards / MERGED_NAME
    try:
        with merged.open("wb") as handle:
            for number in range(count):
                with shard_path(shards, number).open("rb") as shard:
                    shutil.copyfileobj(shard, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(merged, output)
    except OSError as error:
        merged.unlink(missing_ok=True)
        raise QuoterError(f"{output}: cannot write it ({error.strerror}); {RESUME_HINT}") from None
    shutil.rmtree(shards)
