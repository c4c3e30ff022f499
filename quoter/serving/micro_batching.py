"""Gather concurrent requests into batches: one model call serves every request waiting at that moment.

A worker task takes the first waiting request, collects more for at most `max_wait_ms` (or until
`max_batch`), and runs the batch in its own thread so the event loop keeps accepting requests. Requests
that arrive while a batch runs wait together for the next one, so batches grow with load.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class BatchingConfig:
    """max_batch: requests per model call; max_wait_ms: how long a batch waits for more requests."""

    max_batch: int = 32
    max_wait_ms: float = 2.0


class MicroBatcher(Generic[Item, Result]):
    """Runs `process(items) -> results` (same order and length) over batches of concurrent submissions."""

    def __init__(self, process: Callable[[Sequence[Item]], Sequence[Result]], config: BatchingConfig) -> None:
        self._process = process
        self.config = config
        # One thread: batches run one after another, so a model never runs twice at once.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quoter-batch")
        self._queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batch_sizes: Counter[int] = Counter()  # how many batches of each size ran, for tests and tuning

    async def submit(self, item: Item) -> Result:
        """Process one item within the next batch; return its result (or raise its batch's error)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            # First use, or a new event loop (each test client runs its own): start a worker on this one.
            self._loop = loop
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._run(self._queue))
        future: asyncio.Future[Result] = loop.create_future()
        await self._queue.put((item, future))
        return await future

    async def _run(self, queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            deadline = loop.time() + self.config.max_wait_ms / 1000
            while len(batch) < self.config.max_batch:
                if not queue.empty():
                    batch.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), remaining))
                except asyncio.TimeoutError:  # TimeoutError itself only from Python 3.11
                    break
            await self._run_batch(loop, batch)

    async def _run_batch(
        self, loop: asyncio.AbstractEventLoop, batch: list[tuple[Item, asyncio.Future[Result]]]
    ) -> None:
        self.batch_sizes[len(batch)] += 1
        try:
            results = await loop.run_in_executor(self._executor, self._process, [item for item, _ in batch])
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
