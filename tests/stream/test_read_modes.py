"""The read modes: the registry the setting chooses from, and each mode started and
described as the daemon's assembly does (efo on kinesis-local, over HTTP)."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, get_args

import pytest

from consumer.config import ReadMode as ReadModeSetting
from consumer.config import load_settings
from consumer.sequence import Sentinel
from consumer.stream import efo, polling
from consumer.stream.memory import MemoryStream
from consumer.stream.modes import MODES, read_mode, unstarted
from consumer.stream.reader import ShardReader
from consumer.stream.readers import ModeState, ShardRead, StreamOpening
from consumer.stream.subscriber import SubscriptionReader

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient

    from consumer.cli.emulators import LocalStack


def test_the_setting_offers_exactly_the_registered_modes() -> None:
    """LANDER_READ_MODE's choices are the registry's names: a mode registered without
    its setting (or the other way round) fails here."""
    (choices, *_) = get_args(ReadModeSetting)
    assert get_args(choices) == tuple(MODES)
    assert all(read_mode(name) is MODES[name] for name in MODES)


def _read(stream: MemoryStream) -> ShardRead:
    return ShardRead(stream, "shardId-000000000000", Sentinel.TRIM_HORIZON, asyncio.Event())


async def test_polling_needs_nothing_started_and_is_paced_by_the_settings() -> None:
    settings = load_settings(
        stream="s", lease_table="leases", max_records_per_call=77, poll_idle_seconds=0.25
    )
    opening = StreamOpening(settings, "s", kinesis=None)
    factory = await polling.MODE.start(opening)
    reader = factory(_read(MemoryStream(1)))
    assert isinstance(reader, ShardReader)
    assert (reader.limit, reader.idle_seconds) == (77, 0.25)
    assert isinstance(unstarted(settings)(_read(MemoryStream(1))), ShardReader)
    state = await polling.MODE.describe(opening)
    assert state == ModeState("polling", via="GetRecords")
    assert state.line() == "read mode: polling (GetRecords)"
    assert state.as_dict() == {"mode": "polling"}


@pytest.mark.emulator
async def test_efo_starts_by_registering_its_consumer_and_describes_it(
    fanout_stack: LocalStack, fanout_kinesis: KinesisClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Described before start: not registered, and start-up would register it; started:
    the consumer is ACTIVE and shards are read through subscriptions; the subscription
    client is closed with the worker (the exit stack); deregistered on request only."""
    for name, value in fanout_stack.env().items():
        monkeypatch.setenv(name, value)  # the mode opens a client of its own
    stream = f"m-{uuid.uuid4().hex[:10]}"
    await fanout_kinesis.create_stream(StreamName=stream, ShardCount=1)
    await fanout_kinesis.get_waiter("stream_exists").wait(StreamName=stream)
    settings = load_settings(
        stream=stream, lease_table="leases", read_mode="efo", efo_consumer="app"
    )
    try:
        described = StreamOpening(settings, stream, fanout_kinesis, several=True)
        before = await efo.MODE.describe(described)
        assert (before.consumer, before.status) == ("app", "not registered")
        assert before.would == f"register stream consumer app of stream {stream}"
        async with AsyncExitStack() as exits:
            opening = StreamOpening(settings, stream, fanout_kinesis, exits)
            factory = await read_mode("efo").start(opening)
            assert isinstance(factory(_read(MemoryStream(1))), SubscriptionReader)
        after = await efo.MODE.describe(described)
        assert after.status == "ACTIVE"
        assert after.arn is not None
        assert after.line() == f"read mode: efo, stream consumer app: ACTIVE {after.arn}"
        assert await efo.deregister(described)
    finally:
        await fanout_kinesis.delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
