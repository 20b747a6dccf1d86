"""A SubscribeToShard cancelled in flight closes what it opened.

A reader is cancelled when its lease is lost; if that happens while SubscribeToShard is
on the wire, the service may already hold the subscription. Left open, it refuses every
other subscriber of the shard until it times out (kinesis-local held one past the 60 s
of tests/landing/test_landing_processes.py's table-deletion test, 1 run in 4). The
call is let finish and its event stream closed. And a connection that drops
mid-stream is a transient cut of the subscription, never a failure of the shard.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from consumer.sequence import Sentinel
from consumer.stream import StartAt, TransientStreamError
from consumer.stream.kinesis_fanout import KinesisFanOut, KinesisSubscription


class EventStream:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class SlowClient:
    """subscribe_to_shard answers when the test says so (or fails)."""

    def __init__(self, fail: bool = False) -> None:
        self.answer = asyncio.Event()
        self.stream = EventStream()
        self.fail = fail

    async def subscribe_to_shard(self, **kwargs: Any) -> dict[str, Any]:
        await self.answer.wait()
        if self.fail:
            raise TimeoutError("no answer")
        return {"EventStream": self.stream}


async def _cancel_in_flight(client: SlowClient) -> None:
    fanout = KinesisFanOut(client, "s")  # type: ignore[arg-type]
    call = asyncio.create_task(
        fanout.subscribe("arn:consumer", "shardId-000000000000", StartAt(Sentinel.TRIM_HORIZON))
    )
    await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_subscription_opened_after_its_reader_was_cancelled_is_closed() -> None:
    client = SlowClient()
    await _cancel_in_flight(client)
    assert not client.stream.closed  # the service has not answered yet
    client.answer.set()
    await asyncio.sleep(0.01)
    assert client.stream.closed


async def test_a_cancelled_subscribe_that_failed_leaves_nothing_behind() -> None:
    client = SlowClient(fail=True)
    await _cancel_in_flight(client)
    client.answer.set()
    await asyncio.sleep(0.01)
    assert not client.stream.closed  # nothing was opened, and no error left unretrieved


async def test_an_uncancelled_subscribe_still_returns_and_raises_as_before() -> None:
    client = SlowClient()
    client.answer.set()
    fanout = KinesisFanOut(client, "s")  # type: ignore[arg-type]
    subscription = await fanout.subscribe(
        "arn:consumer", "shardId-000000000000", StartAt(Sentinel.TRIM_HORIZON)
    )
    await subscription.close()
    assert client.stream.closed
    failing = SlowClient(fail=True)
    failing.answer.set()
    with pytest.raises(TransientStreamError):
        await KinesisFanOut(failing, "s").subscribe(  # type: ignore[arg-type]
            "arn:consumer", "shardId-000000000000", StartAt(Sentinel.TRIM_HORIZON)
        )


class CutStream(EventStream):
    """An event stream whose connection drops after one event, as aiohttp reports it."""

    async def __aiter__(self) -> Any:
        yield {"SubscribeToShardEvent": {"Records": [], "ContinuationSequenceNumber": "7"}}
        raise aiohttp.ClientPayloadError("Response payload is not completed")


async def test_a_connection_cut_mid_stream_is_transient_not_a_shard_failure() -> None:
    """aiohttp's ClientPayloadError from the event stream (seen in chaos runs as 'shard
    failed; restarting it from its checkpoint') is a transient stream error: the
    reader subscribes again after the last event instead of failing the shard."""
    events = KinesisSubscription(CutStream()).events()
    assert (await anext(events)).continuation == 7
    with pytest.raises(TransientStreamError):
        await anext(events)
