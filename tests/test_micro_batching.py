"""The micro-batcher's scheduling: submissions take turns, so a single item is not stuck behind large batches,
and a model call holds no more items or tokens than configured."""

import asyncio
import threading

from quoter.serving.micro_batching import BatchingConfig, MicroBatcher

Item = tuple[str, int]  # a name, and how many tokens it has


def recording_process(calls: list[list[str]], first_running: threading.Event, release: threading.Event):
    """A model that records each call's item names and holds its first call until released."""

    def process(items: list[Item]) -> list[str]:
        calls.append([name for name, _ in items])
        if len(calls) == 1:
            first_running.set()
            release.wait(10)
        return [name.upper() for name, _ in items]

    return process


def test_a_single_item_is_not_stuck_behind_large_submissions():
    calls: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()
    config = BatchingConfig(max_batch=8, max_wait_ms=0, max_batch_tokens=64)
    batcher = MicroBatcher(recording_process(calls, first_running, release), config, tokens=lambda item: item[1])
    large = [[(f"batch{b}-{i}", 16) for i in range(64)] for b in range(4)]

    async def drive():
        batches = [asyncio.create_task(batcher.submit(items)) for items in large]
        await asyncio.to_thread(first_running.wait, 10)
        single = asyncio.create_task(batcher.submit([("single", 4)]))
        await asyncio.sleep(0.05)  # the single item waits while the first call runs
        release.set()
        results = await asyncio.gather(*batches, single)
        await batcher.close()
        return results

    results = asyncio.run(drive())
    # Each submission gets its own results, in order, though its items ran over many calls.
    assert results[:4] == [[name.upper() for name, _ in items] for items in large]
    assert results[4] == ["SINGLE"]
    # The first call took one item of each batch; the single item ran in the very next call, not after 256 items.
    assert calls[0] == ["batch0-0", "batch1-0", "batch2-0", "batch3-0"]
    assert calls[1][0] == "single"
    tokens = {name: count for items in large for name, count in items} | {"single": 4}
    assert all(len(call) <= 8 and sum(tokens[name] for name in call) <= 64 for call in calls)


def unblocked_batcher(calls: list[list[str]], config: BatchingConfig) -> MicroBatcher:
    """A batcher whose calls are recorded in `calls` and never held back; an item's tokens are its second part."""
    first_running, release = threading.Event(), threading.Event()
    release.set()
    return MicroBatcher(recording_process(calls, first_running, release), config, tokens=lambda item: item[1])


def test_an_item_over_the_token_budget_runs_alone():
    calls: list[list[str]] = []
    batcher = unblocked_batcher(calls, BatchingConfig(max_batch=8, max_wait_ms=50, max_batch_tokens=64))

    async def drive():
        results = await asyncio.gather(batcher.submit([("long", 100)]), batcher.submit([("a", 30), ("b", 30)]))
        await batcher.close()
        return results

    assert asyncio.run(drive()) == [["LONG"], ["A", "B"]]
    assert calls == [["long"], ["a", "b"]]


def test_a_lone_submission_runs_at_once_and_returning_submitters_are_waited_for():
    calls: list[list[str]] = []
    batcher = unblocked_batcher(calls, BatchingConfig(max_batch=8, max_wait_ms=2000, max_batch_tokens=64))

    async def drive():
        loop = asyncio.get_running_loop()
        started = loop.time()
        alone = await batcher.submit([("alone", 1)])  # nothing else is waiting or was served: no wait
        alone_s = loop.time() - started
        await asyncio.gather(batcher.submit([("a", 1)]), batcher.submit([("b", 1)]))  # one call served two
        # So the next call waits (at most max_wait_ms) for a second submitter before it runs.
        first = asyncio.create_task(batcher.submit([("c", 1)]))
        await asyncio.sleep(0.05)
        second = await batcher.submit([("d", 1)])
        await batcher.close()
        return alone, alone_s, await first, second

    alone, alone_s, first, second = asyncio.run(drive())
    assert (alone, first, second) == (["ALONE"], ["C"], ["D"])
    assert alone_s < 1.0
    assert calls == [["alone"], ["a", "b"], ["c", "d"]]


def test_a_lone_item_runs_on_the_event_loop_thread_and_a_batch_in_the_batch_thread():
    threads: list[tuple[int, int]] = []

    def process(items: list[Item]) -> list[str]:
        threads.append((len(items), threading.get_ident()))
        return [name for name, _ in items]

    batcher = MicroBatcher(process, BatchingConfig(max_batch=8, max_wait_ms=0), tokens=lambda item: item[1])

    async def drive() -> int:
        await batcher.submit([("lone", 4)])
        await batcher.submit([("a", 4), ("b", 4), ("c", 4)])
        await batcher.close()
        return threading.get_ident()

    loop_thread = asyncio.run(drive())
    assert threads[0] == (1, loop_thread)
    assert threads[1][0] == 3 and threads[1][1] != loop_thread
