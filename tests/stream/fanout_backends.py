"""The fan-out backends under test: the in-memory stream, and kinesis-local over HTTP
(started by the session's ``fanout_stack`` fixture, :mod:`tests.stream.conftest`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from consumer.stream import StreamClient
from consumer.stream.fanout import FanOutClient, StreamConsumer
from consumer.stream.kinesis import KinesisStream
from consumer.stream.kinesis_fanout import KinesisFanOut
from consumer.stream.memory import MemoryStream
from consumer.stream.memory_fanout import MemoryFanOut

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient


class FanOutBackend(Protocol):
    """A stream with fan-out, plus the producer side the contract needs."""

    stream: StreamClient
    fanout: FanOutClient
    settle: float
    """Seconds an event takes to arrive after a put, at most (kinesis-local polls 1/s)."""

    async def put(self, data: bytes, key: str = "k") -> tuple[str, int]: ...


class MemoryFanOutBackend:
    def __init__(
        self,
        *,
        shards: int = 1,
        event_interval: float = 0.02,
        lifetime: float = 300.0,
        takeover_seconds: float = 5.0,
    ) -> None:
        self.memory = MemoryStream(shards)
        self.stream: StreamClient = self.memory
        self.memory_fanout = MemoryFanOut(
            self.memory,
            event_interval=event_interval,
            lifetime=lifetime,
            takeover_seconds=takeover_seconds,
        )
        self.fanout: FanOutClient = self.memory_fanout
        self.settle = 0.5

    async def put(self, data: bytes, key: str = "k") -> tuple[str, int]:
        return self.memory.put(data, key)


class KinesisFanOutBackend:
    def __init__(self, client: KinesisClient, name: str) -> None:
        self.client = client
        self.name = name
        self.stream: StreamClient = KinesisStream(client, name)
        self.fanout: FanOutClient = KinesisFanOut(client, name)
        self.settle = 4.0

    async def create(self, shards: int = 1) -> None:
        await self.client.create_stream(StreamName=self.name, ShardCount=shards)
        for _ in range(400):
            summary = await self.client.describe_stream_summary(StreamName=self.name)
            if summary["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                return
            await asyncio.sleep(0.05)
        raise AssertionError("stream never became ACTIVE")

    async def put(self, data: bytes, key: str = "k") -> tuple[str, int]:
        out = await self.client.put_record(StreamName=self.name, Data=data, PartitionKey=key)
        return out["ShardId"], int(out["SequenceNumber"])


async def active_consumer(fanout: FanOutClient, name: str) -> StreamConsumer:
    """Register ``name`` and wait until it is ACTIVE."""
    consumer = await fanout.register_consumer(name)
    for _ in range(200):
        if consumer.status == "ACTIVE":
            return consumer
        await asyncio.sleep(0.05)
        found = await fanout.describe_consumer(name)
        assert found is not None
        consumer = found
    raise AssertionError(f"consumer {name} never became ACTIVE: {consumer}")
