"""Gather concurrent requests into batches: one model call serves every request waiting at that moment.

A worker task takes the first waiting item, collects more for at most `max_wait_ms` (or until `max_batch`
items or `max_batch_tokens` tokens), and runs the batch in its own thread so the event loop keeps accepting
requests. Items that arrive while a batch runs wait together for the next one, so batches grow with load.
A batch of one item, what a lone client sends, runs on the event loop's own thread instead: handing it to
the batch thread and back wakes two idle threads, and on a machine whose idle CPUs sleep that took longer
than encoding a short context (one client alternating with another service: 7.1 ms a request through the
batch thread, 5.1 ms on the loop; benchmarks.versus). The loop then reads new requests one model call
later, which is when the model could take them anyway.

The wait is only for submitters that are likely to come back: it stops as soon as the batch holds as many
submissions as the previous model call served, and a lone submission after a call that served one runs at
once. So a single client never waits `max_wait_ms` for nobody (2 ms of its 5 ms on a CPU), while under
load, when the clients of the last batch send their next requests, the batch still gathers them all.

Each submission (one request: one context, or a batch of them) takes turns with the others: a model call
goes first to the items of the submissions that have had the fewest items processed so far, so a single
context is not stuck behind a large batch that arrived before it; the token budget keeps one call short.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from quoter.settings import setting

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class BatchingConfig:
    """max_batch: items per model call; max_wait_ms: how long a batch waits for more items at most (only while
    the submitters of the last call may come back, see above); max_batch_tokens: the items' tokens per model
    call (an item with more runs alone), so that one call stays short: four contexts of the most tokens the
    encoder reads (256), about 0.3 s on one CPU thread."""

    max_batch: int = setting(32, "Concurrent requests encoded together at most")
    max_wait_ms: float = setting(2.0, "How long a batch waits for more requests, in ms")
    max_batch_tokens: int = setting(
        1024, "Context tokens encoded together at most, so that one encoder call stays short"
    )


class _Submission(Generic[Item, Result]):
    """The items of one submission that wait for a model call, and how many of its items were taken already."""

    def __init__(self, items: Sequence[Item], futures: Sequence[asyncio.Future[Result]]) -> None:
        self.waiting = deque(zip(items, futures))
        self.taken = 0


class MicroBatcher(Generic[Item, Result]):
    """Runs `process(items) -> results` (same order and length) over batches of concurrent submissions;
    `tokens(item)` estimates an item's tokens from above."""

    def __init__(
        self,
        process: Callable[[Sequence[Item]], Sequence[Result]],
        config: BatchingConfig,
        tokens: Callable[[Item], int],
    ) -> None:
        self._process = process
        self._tokens = tokens
        self.config = config
        # One thread: batches run one after another, so a model never runs twice at once.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quoter-batch")
        self._submissions: list[_Submission[Item, Result]] = []  # in arrival order
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batch_sizes: Counter[int] = Counter()  # how many batches of each size ran, for tests and tuning
        self._last_submitters = 0  # how many submissions the last model call served

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Process the items within the next batches; return their results in order (or raise a batch's error)."""
        if not items:
            return []
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            # First use, or a new event loop (each test client runs its own): start a worker on this one.
            self._loop = loop
            self._submissions = []
            self._last_submitters = 0
            self._arrived = asyncio.Event()
            self._worker = loop.create_task(self._run(self._arrived))
        futures = [loop.create_future() for _ in items]
        self._submissions.append(_Submission(items, futures))
        self._arrived.set()
        return list(await asyncio.gather(*futures))

    async def _run(self, arrived: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._submissions:
                arrived.clear()
                await arrived.wait()
            batch: list[tuple[Item, asyncio.Future[Result]]] = []
            submitters: set[_Submission[Item, Result]] = set()
            full = self._fill(batch, submitters)
            deadline = loop.time() + self.config.max_wait_ms / 1000
            # Wait only for the last call's submitters to come back: after a call that served one, a lone
            # submission runs at once.
            while not full and len(submitters) < self._last_submitters and (remaining := deadline - loop.time()) > 0:
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), remaining)
                except asyncio.TimeoutError:  # TimeoutError itself only from Python 3.11
                    break
                full = self._fill(batch, submitters)
            self._last_submitters = len(submitters)
            if batch:
                await self._run_batch(loop, batch)

    def _fill(
        self, batch: list[tuple[Item, asyncio.Future[Result]]], submitters: set[_Submission[Item, Result]]
    ) -> bool:
        """Move waiting items into the batch, those of the submissions with the fewest items taken first (the
        earliest of equals), adding their submissions to `submitters`; return whether the batch is full."""
        tokens = sum(self._tokens(item) for item, _ in batch)
        while self._submissions:
            if len(batch) >= self.config.max_batch:
                return True
            submission = min(self._submissions, key=lambda waiting: waiting.taken)
            item, future = submission.waiting[0]
            if batch and tokens + self._tokens(item) > self.config.max_batch_tokens:
                return True
            submission.waiting.popleft()
            submission.taken += 1
            if not submission.waiting:
                self._submissions.remove(submission)
            if not future.done():  # else its client went away
                batch.append((item, future))
                submitters.add(submission)
                tokens += self._tokens(item)
        return len(batch) >= self.config.max_batch

    async def _run_batch(
        self, loop: asyncio.AbstractEventLoop, batch: list[tuple[Item, asyncio.Future[Result]]]
    ) -> None:
        self.batch_sizes[len(batch)] += 1
        items = [item for item, _ in batch]
        try:
            if len(items) == 1:
                results = self._process(items)
            else:
                results = await loop.run_in_executor(self._executor, self._process, items)
        except Exception as error:  # the error belongs to every request of the batch, not to the worker
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(batch, results):
            if not future.done():  # its client may have gone away
                future.set_result(result)

    async def close(self) -> None:
        """Stop the worker; a later submission starts a new one."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
