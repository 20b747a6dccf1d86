"""One contract for enhanced fan-out, run against the in-memory stream and kinesis-local
(over HTTP, through aiobotocore and the tolerant event-stream parser).

What kinesis-local cannot show (child shards, the five-second takeover, silent
subscriptions) is tested on the in-memory stream alone, in test_subscription_reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from consumer.sequence import Position, Sentinel
from consumer.stream import StartAt, StreamError, StreamNotFoundError
from consumer.stream.fanout import ShardEvent, Subscription, SubscriptionInUseError
from consumer.stream.subscriber import SubscriptionReader
from tests.stream.fanout_backends import (
    FanOutBackend,
    KinesisFanOutBackend,
    MemoryFanOutBackend,
    active_consumer,
)

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient

SHARD = "shardId-000000000000"


@pytest.fixture(params=["memory", pytest.param("kinesis-local", marks=pytest.mark.emulator)])
def client(request: pytest.FixtureRequest) -> KinesisClient | None:
    """None for the in-memory stream; a client on kinesis-local, requested only then,
    so that the memory variant boots no emulator (and runs in `make test-fast`)."""
    if request.param == "memory":
        return None
    kinesis: KinesisClient = request.getfixturevalue("fanout_kinesis")
    return kinesis


@pytest.fixture
async def backend(client: KinesisClient | None) -> AsyncIterator[FanOutBackend]:
    """A fresh one-shard stream with fan-out on each backend."""
    if client is None:
        yield MemoryFanOutBackend()
        return
    kinesis = KinesisFanOutBackend(client, f"s-{uuid.uuid4().hex[:10]}")
    await kinesis.create()
    try:
        yield kinesis
    finally:
        await client.delete_stream(StreamName=kinesis.name, EnforceConsumerDeletion=True)


async def _collect(subscription: Subscription, want: int, within: float) -> list[ShardEvent]:
    """Events until ``want`` records came (or the time is up), then close."""
    events: list[ShardEvent] = []

    async def read() -> None:
        async for event in subscription.events():
            events.append(event)
            if sum(len(e.records) for e in events) >= want:
                return

    try:
        await asyncio.wait_for(read(), within)
    except TimeoutError:
        pass
    finally:
        await subscription.close()
    return events


def _sequences(events: list[ShardEvent]) -> list[int]:
    return [r.sequence for e in events for r in e.records]


async def test_register_describe_and_deregister(backend: FanOutBackend) -> None:
    """A consumer is registered once (registering again describes it), becomes ACTIVE,
    and is gone after deregistration."""
    assert await backend.fanout.describe_consumer("app") is None
    consumer = await active_consumer(backend.fanout, "app")
    again = await backend.fanout.register_consumer("app")
    assert (again.name, again.arn) == ("app", consumer.arn)
    assert await backend.fanout.deregister_consumer("app")
    for _ in range(100):
        if await backend.fanout.describe_consumer("app") is None:
            break
        await asyncio.sleep(0.05)
    assert await backend.fanout.describe_consumer("app") is None
    assert not await backend.fanout.deregister_consumer("app")


async def test_events_carry_records_in_order_and_a_continuation(backend: FanOutBackend) -> None:
    """From TRIM_HORIZON every record comes, in order; the continuation of the last
    event is at or past the last record; nothing but the end lacks a continuation."""
    consumer = await active_consumer(backend.fanout, "app")
    put = [(await backend.put(f"r{i}".encode()))[1] for i in range(5)]
    sub = await backend.fanout.subscribe(consumer.arn, SHARD, StartAt(Sentinel.TRIM_HORIZON))
    events = await _collect(sub, 5, backend.settle + 2)
    assert _sequences(events) == put
    assert [r.data for e in events for r in e.records] == [f"r{i}".encode() for i in range(5)]
    assert all(e.continuation is not None and e.children is None for e in events)
    last = events[-1].continuation
    assert last is not None
    assert last >= put[-1]


async def test_after_a_continuation_comes_exactly_the_rest(backend: FanOutBackend) -> None:
    """A subscription after a continuation starts with the next record; one at a
    sequence number starts with that record."""
    consumer = await active_consumer(backend.fanout, "app")
    put = [(await backend.put(f"r{i}".encode()))[1] for i in range(4)]
    sub = await backend.fanout.subscribe(
        consumer.arn, SHARD, StartAt(Sentinel.TRIM_HORIZON), after=put[1]
    )
    assert _sequences(await _collect(sub, 2, backend.settle + 2)) == put[2:]
    # Another consumer: this one's subscription counts as live for five seconds after
    # the call, closed or not (kinesis-local too).
    other = await active_consumer(backend.fanout, "other")
    sub = await backend.fanout.subscribe(other.arn, SHARD, StartAt(None, Position(put[1])))
    assert _sequences(await _collect(sub, 3, backend.settle + 2)) == put[1:]


async def test_latest_sees_only_what_comes_after(backend: FanOutBackend) -> None:
    consumer = await active_consumer(backend.fanout, "app")
    await backend.put(b"before")
    sub = await backend.fanout.subscribe(consumer.arn, SHARD, StartAt(Sentinel.LATEST))
    reading = asyncio.create_task(_collect(sub, 1, backend.settle + 3))
    await asyncio.sleep(backend.settle / 2)
    _, after = await backend.put(b"after")
    assert _sequences(await reading) == [after]


async def test_a_second_live_subscription_is_refused(backend: FanOutBackend) -> None:
    """Within five seconds of a subscription, another for the same consumer and shard
    is refused with ResourceInUse: at the call, or as the first thing in its stream."""
    consumer = await active_consumer(backend.fanout, "app")
    first = await backend.fanout.subscribe(consumer.arn, SHARD, StartAt(Sentinel.TRIM_HORIZON))
    try:
        await asyncio.sleep(1.1)
        with pytest.raises(SubscriptionInUseError):
            await _first_event(backend, consumer.arn, SHARD)
    finally:
        await first.close()


async def test_an_unknown_consumer_is_not_found(backend: FanOutBackend) -> None:
    consumer = await active_consumer(backend.fanout, "app")
    gone = consumer.arn.replace("consumer/app", "consumer/nobody")
    with pytest.raises(StreamNotFoundError):
        await _first_event(backend, gone, SHARD)


async def test_an_unknown_shard_is_not_found() -> None:
    """AWS answers ResourceNotFound; kinesis-local instead sends empty events with
    continuation 0 for ever, so this is the in-memory stream's alone."""
    backend = MemoryFanOutBackend()
    consumer = await active_consumer(backend.fanout, "app")
    with pytest.raises(StreamError) as raised:
        await _first_event(backend, consumer.arn, "shardId-000000000099")
    assert isinstance(raised.value, StreamNotFoundError)


async def _first_event(backend: FanOutBackend, arn: str, shard: str) -> None:
    """Subscribe and read one event: refusals come at the call or in the stream."""
    sub = await backend.fanout.subscribe(arn, shard, StartAt(Sentinel.TRIM_HORIZON))
    try:
        async with asyncio.timeout(backend.settle + 2):
            async for _ in sub.events():
                return
    finally:
        await sub.close()


async def test_the_reader_delivers_every_record_once(backend: FanOutBackend) -> None:
    """The fan-out reader on each backend: records put before and while it reads all
    come, in order, once."""
    consumer = await active_consumer(backend.fanout, "app")
    reader = SubscriptionReader(
        backend.stream, backend.fanout, consumer, SHARD, Sentinel.TRIM_HORIZON
    )
    for i in range(5):
        await backend.put(f"r{i}".encode())
    got: list[bytes] = []

    async def read() -> None:
        async with contextlib.aclosing(reader.batches()) as batches:
            async for batch in batches:
                got.extend(r.data for r in batch.records)
                if len(got) >= 10:
                    return

    reading = asyncio.create_task(read())
    await asyncio.sleep(backend.settle / 2)
    for i in range(5, 10):
        await backend.put(f"r{i}".encode())
    await asyncio.wait_for(reading, 2 * backend.settle + 5)
    assert got == [f"r{i}".encode() for i in range(10)]
