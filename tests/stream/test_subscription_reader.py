"""The fan-out reader's recovery rules on the in-memory stream (which can show child
shards, takeovers, silent subscriptions and invalid events; kinesis-local cannot)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest

from consumer.metrics import LanderMetrics
from consumer.sequence import Position, Sentinel
from consumer.stream import Shard, StreamNotFoundError, TransientStreamError
from consumer.stream.fanout import ConsumerNotFoundError, SubscriptionInUseError
from consumer.stream.memory import MAX_HASH
from consumer.stream.reader import Batch
from consumer.stream.subscriber import QUEUE_EVENTS, SubscriptionReader
from tests.stream.fanout_backends import MemoryFanOutBackend, active_consumer

SHARD = "shardId-000000000000"


def _fast(lifetime: float = 300.0) -> MemoryFanOutBackend:
    """Events every 5 ms; a closed subscription stops counting as live after 50 ms."""
    return MemoryFanOutBackend(event_interval=0.005, takeover_seconds=0.05, lifetime=lifetime)


async def _reader(
    backend: MemoryFanOutBackend, checkpoint: Position | Sentinel = Sentinel.TRIM_HORIZON
) -> SubscriptionReader:
    consumer = await active_consumer(backend.fanout, "app")
    return SubscriptionReader(
        backend.stream,
        backend.fanout,
        consumer,
        SHARD,
        checkpoint,
        silence_seconds=0.3,
        subscribe_interval=0.01,
        retry_base=0.01,
    )


async def _read(
    reader: SubscriptionReader, until: Callable[[list[Batch]], bool], within: float = 5.0
) -> list[Batch]:
    """Batches until ``until`` holds (or the shard ends); then the generator is closed."""
    batches: list[Batch] = []
    async with asyncio.timeout(within), contextlib.aclosing(reader.batches()) as stream:
        async for batch in stream:
            batches.append(batch)
            if batch.shard_end or until(batches):
                break
    return batches


def _data(batches: list[Batch]) -> list[bytes]:
    return [r.data for b in batches for r in b.records]


def _count(n: int) -> Callable[[list[Batch]], bool]:
    return lambda batches: len(_data(batches)) >= n


async def test_every_record_once_across_subscriptions_that_end() -> None:
    """Subscriptions end every 50 ms (AWS: five minutes); each next one starts after the
    last continuation handed on: nothing lost, nothing twice."""
    backend = _fast(lifetime=0.05)
    reader = await _reader(backend)

    async def produce() -> None:
        for i in range(200):
            await backend.put(f"r{i}".encode())
            await asyncio.sleep(0.001)

    producing = asyncio.create_task(produce())
    batches = await _read(reader, _count(200))
    await producing
    assert _data(batches) == [f"r{i}".encode() for i in range(200)]
    assert reader.restarts.get("subscription ended", 0) >= 2
    assert reader.subscriptions >= 3


async def test_a_checkpoint_resumes_at_the_next_record() -> None:
    backend = _fast()
    puts = [(await backend.put(f"r{i}".encode()))[1] for i in range(5)]
    reader = await _reader(backend, Position(puts[1]))
    assert _data(await _read(reader, _count(3))) == [b"r2", b"r3", b"r4"]


async def test_shard_end_with_children_ends_the_shard() -> None:
    backend = _fast()
    await backend.put(b"before")
    backend.memory.split(SHARD, MAX_HASH // 2)
    batches = await _read(await _reader(backend), lambda _: False)
    assert batches[-1].shard_end
    assert _data(batches) == [b"before"]


async def test_an_end_without_children_is_checked_with_getrecords() -> None:
    """kinesis-local never sends child shards: a shard end without them stands only
    when GetRecords agrees the shard is closed and read."""
    backend = _fast()
    await backend.put(b"before")
    backend.memory.split(SHARD, MAX_HASH // 2)
    backend.memory_fanout.faults.invalid_ends = 1
    batches = await _read(await _reader(backend), lambda _: False)
    assert batches[-1].shard_end
    assert _data(batches) == [b"before"]


async def test_a_closed_shard_whose_subscription_never_ends_still_ends() -> None:
    """kinesis-local keeps sending empty events for a closed shard it has delivered
    in full; after the quiet time one GetRecords finds the end. An open quiet shard is
    asked too, and goes on."""
    backend = _fast()
    backend.memory_fanout.faults.endless = True
    reader = await _reader(backend)
    reader.end_check_seconds = 0.1
    await backend.put(b"r0")
    quiet = await _read(reader, lambda batches: len(batches) > 60)
    assert not any(b.shard_end for b in quiet)
    backend.memory.split(SHARD, MAX_HASH // 2)
    reader = await _reader(backend, quiet[0].records[0].position)
    reader.end_check_seconds = 0.1
    batches = await _read(reader, lambda _: False)
    assert batches[-1].shard_end
    assert _data(batches) == []


async def test_an_invalid_event_on_an_open_shard_restarts_not_ends() -> None:
    backend = _fast()
    backend.memory_fanout.faults.false_ends = 1
    reader = await _reader(backend)
    await backend.put(b"r0")
    batches = await _read(reader, _count(1))
    assert _data(batches) == [b"r0"]
    assert not any(b.shard_end for b in batches)
    assert reader.restarts["invalid event"] == 1


async def test_in_use_and_transient_errors_back_off_and_resubscribe() -> None:
    backend = _fast()
    backend.memory_fanout.faults.subscribe = [
        SubscriptionInUseError("in use"),
        TransientStreamError("reset"),
    ]
    backend.memory_fanout.faults.in_stream = [TransientStreamError("read timeout")]
    reader = await _reader(backend)
    for i in range(3):
        await backend.put(f"r{i}".encode())
    reading = asyncio.create_task(_read(reader, _count(5)))
    await asyncio.sleep(0.2)
    for i in range(3, 5):
        await backend.put(f"r{i}".encode())
    batches = await reading
    assert _data(batches) == [f"r{i}".encode() for i in range(5)]
    assert reader.restarts["SubscriptionInUseError"] == 1
    assert reader.restarts["TransientStreamError"] == 2


async def test_a_silent_subscription_is_restarted() -> None:
    """KCL #463: a subscription that sends nothing at all is cancelled and started
    again after the silence bound, and reading goes on."""
    backend = _fast()
    backend.memory_fanout.faults.silent = 1
    reader = await _reader(backend)
    await backend.put(b"r0")
    batches = await _read(reader, _count(1))
    assert _data(batches) == [b"r0"]
    assert reader.restarts["silent"] == 1


async def test_a_newer_subscription_takes_over_after_five_seconds() -> None:
    """A second reader of the shard (a zombie's successor) is refused at first, then
    takes over; the first one's stream then fails with ResourceInUse."""
    backend = MemoryFanOutBackend(event_interval=0.005, takeover_seconds=0.3)
    first = await _reader(backend)
    second = await _reader(backend)
    await backend.put(b"r0")
    stop_first = asyncio.Event()
    first.stopping = stop_first
    reading = asyncio.create_task(_read(first, lambda _: False, within=10))
    await asyncio.sleep(0.1)
    assert _data(await _read(second, _count(1))) == [b"r0"]
    assert second.restarts.get("SubscriptionInUseError", 0) >= 1
    await asyncio.sleep(0.1)
    stop_first.set()
    await reading
    assert first.restarts.get("SubscriptionInUseError", 0) >= 1


async def test_stopping_and_closing_drop_the_subscription_at_once() -> None:
    backend = _fast()
    reader = await _reader(backend)
    await backend.put(b"r0")
    batches = reader.batches()
    assert _data([await anext(batches)]) == [b"r0"]
    live = next(iter(backend.memory_fanout._live.values()))
    reader.stopping.set()
    async with asyncio.timeout(1):
        with pytest.raises(StopAsyncIteration):
            await anext(batches)
    assert live.closed

    reader = await _reader(backend)
    reader.start = reader.resume_point()
    await backend.put(b"r1")
    batches = reader.batches()
    await anext(batches)
    live = next(iter(backend.memory_fanout._live.values()))
    await batches.aclose()  # the shard consumer cancelled its fetch
    assert live.closed


async def test_a_fetch_cancelled_twice_still_drops_the_subscription() -> None:
    """The worker cancels a lost shard's task once per notice (its board slot lost,
    then a renewal refused): a second cancellation during the reader's clean-up must
    not skip the close, or the service refuses the new owner for five minutes."""
    backend = _fast()
    reader = await _reader(backend)
    await backend.put(b"r0")
    got = asyncio.Event()

    async def fetch() -> None:  # as the shard consumer's fetcher reads
        async with contextlib.aclosing(reader.batches()) as batches:
            async for _ in batches:
                got.set()

    task = asyncio.create_task(fetch())
    async with asyncio.timeout(1):
        await got.wait()
    live = next(iter(backend.memory_fanout._live.values()))
    for _ in range(3):
        task.cancel()
        await asyncio.sleep(0)  # the clean-up runs up to its next wait
    await asyncio.gather(task, return_exceptions=True)
    assert live.closed


async def test_a_slow_processor_holds_the_stream_back() -> None:
    """The pump stops reading once QUEUE_EVENTS events wait: the service is held back,
    events do not pile up."""
    backend = MemoryFanOutBackend(event_interval=0.001)
    reader = await _reader(backend)
    for i in range(50):
        await backend.put(f"r{i}".encode())
    batches = reader.batches()
    await anext(batches)
    await asyncio.sleep(0.2)  # a slow processor
    live = next(iter(backend.memory_fanout._live.values()))
    assert live.sent <= 1 + QUEUE_EVENTS + 1
    await batches.aclose()


async def test_not_found_is_the_end_of_a_trimmed_shard_or_a_missing_consumer() -> None:
    backend = _fast()
    reader = await _reader(backend)
    backend.memory_fanout.faults.subscribe = [StreamNotFoundError("gone")]
    listed = backend.memory.list_shards

    async def without_it() -> list[Shard]:
        return [s for s in await listed() if s.shard_id != SHARD]

    backend.memory.list_shards = without_it  # type: ignore[method-assign]
    batches = await _read(reader, lambda _: False)
    assert [b.shard_end for b in batches] == [True]

    backend.memory.list_shards = listed  # type: ignore[method-assign]
    reader = await _reader(backend)
    await backend.fanout.deregister_consumer("app")
    with pytest.raises(ConsumerNotFoundError, match="app"):
        await _read(reader, lambda _: False)


async def test_the_lag_of_each_event_is_the_shards_behind_latest_gauge() -> None:
    """The efo reader reports lander_behind_latest_seconds as the polling one does (it
    reported none: an efo fleet had no lag series for the LanderFallingBehind alert)."""
    backend = _fast()
    for i in range(3):
        await backend.put(f"r{i}".encode())
    consumer = await active_consumer(backend.fanout, "app")
    metrics = LanderMetrics()
    reader = SubscriptionReader(
        backend.stream,
        backend.fanout,
        consumer,
        SHARD,
        Sentinel.TRIM_HORIZON,
        silence_seconds=0.3,
        subscribe_interval=0.01,
        retry_base=0.01,
        metrics=metrics,
        stream_name="orders",
    )
    await _read(reader, _count(3))
    lag = metrics.registry.get_sample_value(
        "lander_behind_latest_seconds", {"stream": "orders", "shard_id": SHARD}
    )
    assert lag is not None
    assert lag >= 0
