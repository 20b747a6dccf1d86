"""Workers in efo read mode, in process, on the in-memory stream and lease table: the
shard consumer reads through subscriptions, and leases, hand-offs, resharding and
checkpoints behave as under polling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from consumer.config import load_settings
from consumer.leases.memory import MemoryLeaseStore
from consumer.lifecycle.processor import RecordProcessor
from consumer.lifecycle.worker import Worker
from consumer.stream.efo import fanout
from consumer.stream.fanout import FanOutReading, ensure_consumer
from consumer.stream.memory import MAX_HASH, MemoryStream
from consumer.stream.memory_fanout import MemoryFanOut
from tests.lifecycle.test_worker_inprocess import FAST, Journal, JournalProcessor


async def _reading(stream: MemoryStream) -> tuple[MemoryFanOut, FanOutReading]:
    fanout = MemoryFanOut(stream, event_interval=0.01, takeover_seconds=0.2)
    consumer = await ensure_consumer(fanout, "leases", within=5)
    return fanout, FanOutReading(fanout, consumer)


def _worker(
    stream: MemoryStream,
    store: MemoryLeaseStore,
    journal: Journal,
    reading: FanOutReading,
    name: str,
) -> Worker:
    settings = load_settings(
        stream="s",
        lease_table="leases",
        worker_id=name,
        read_mode="efo",
        **FAST,
    )
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(journal)  # noqa: E731
    return Worker(
        settings,
        store,
        stream,
        factory,
        reader=fanout(reading, end_check_seconds=settings.shard_sync_seconds),
    )


async def _until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_split_parent_ends_by_its_event_and_children_follow() -> None:
    """Every record once, through subscriptions; the parent's end comes as a fan-out
    event with child shards, and the children are read after it."""
    stream = MemoryStream(1)
    fanout, reading = await _reading(stream)
    before = [stream.put(f"a{i}".encode(), f"k{i}")[1] for i in range(20)]
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, reading, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) >= 20)
    stream.split("shardId-000000000000", MAX_HASH // 2)
    after = [stream.put(f"b{i}".encode(), f"k{i}")[1] for i in range(20)]
    await _until(lambda: len(journal.delivered) >= 40)
    worker.request_stop()
    await task
    sequences = [p.sequence for _, p, _ in journal.delivered]
    assert sorted(sequences) == sorted(before + after)
    assert ("shardId-000000000000", "shard_ended") in journal.calls
    first_child = min(
        i for i, (shard, _, _) in enumerate(journal.delivered) if shard != "shardId-000000000000"
    )
    assert all(shard == "shardId-000000000000" for shard, _, _ in journal.delivered[:first_child])
    assert fanout.subscribe_calls >= 3
    assert all(sub.closed for sub in fanout._live.values())


async def test_a_hand_off_moves_the_subscription_and_loses_nothing() -> None:
    """A second worker takes half the shards by hand-off; its subscriptions start
    where the checkpoints are; no record reaches both workers."""
    stream = MemoryStream(4)
    _, reading = await _reading(stream)
    store = MemoryLeaseStore()
    first, second = Journal(), Journal()
    w1 = _worker(stream, store, first, reading, "w1")
    tasks = [asyncio.create_task(w1.run())]
    for i in range(40):
        stream.put(f"a{i}".encode(), f"k{i}")
    await _until(lambda: len(first.delivered) >= 40)
    w2 = _worker(stream, store, second, reading, "w2")
    tasks.append(asyncio.create_task(w2.run()))
    await _until(lambda: len(w2.coordinator.held) == 2 and len(w1.coordinator.held) == 2)
    for i in range(40):
        stream.put(f"b{i}".encode(), f"k{i}")
    await _until(lambda: len(first.delivered) + len(second.delivered) >= 80)
    w1.request_stop()
    w2.request_stop()
    await asyncio.gather(*tasks)
    got = [d for _, _, d in first.delivered + second.delivered]
    assert sorted(got) == sorted(
        [f"a{i}".encode() for i in range(40)] + [f"b{i}".encode() for i in range(40)]
    )
    assert second.delivered, "the second worker read nothing"


@pytest.mark.parametrize("describes", [0, 3])
async def test_the_consumer_is_registered_and_waited_for(describes: int) -> None:
    fanout = MemoryFanOut(MemoryStream(1), activation_describes=describes)
    consumer = await ensure_consumer(fanout, "app", within=10, sleep=_no_sleep)
    assert (consumer.name, consumer.status) == ("app", "ACTIVE")


async def test_a_consumer_that_never_activates_is_a_clear_error() -> None:
    from consumer.stream.fanout import ConsumerNotActiveError

    fanout = MemoryFanOut(MemoryStream(1), activation_describes=10**9)
    ticks = iter(range(10**6))
    with pytest.raises(ConsumerNotActiveError, match="'app' is not ACTIVE after 5 s"):
        await ensure_consumer(fanout, "app", within=5, clock=lambda: next(ticks), sleep=_no_sleep)


async def _no_sleep(_: float) -> None:
    return None
