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


def test_an_item_over_the_token_budget_runs_alone():
    calls: list[list[str]] = []
    first_running, release = threading.Event(), threading.Event()
    release.set()
    config = BatchingConfig(max_batch=8, max_wait_ms=50, max_batch_tokens=64)
    batcher = MicroBatcher(recording_process(calls, first_running, release), config, tokens=lambda item: item[1])

    async def drive():
        results = await asyncio.gather(batcher.submit([("long", 100)]), batcher.submit([("a", 30), ("b", 30)]))
        await batcher.close()
        return results

    assert asyncio.run(drive()) == [["LONG"], ["A", "B"]]
    assert calls == [["long"], ["a", "b"]]
