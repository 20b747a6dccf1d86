"""One contract for reading a stream, run against the in-memory fake and kinesalite."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

import pytest

from consumer.aws import Clients
from consumer.sequence import Position, Sentinel
from consumer.stream import StartAt, StreamClient
from consumer.stream.kinesis import KinesisStream
from consumer.stream.memory import MAX_HASH, MemoryStream

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient


class Backend(Protocol):
    """A stream under test plus the producer-side controls the contract needs."""

    stream: StreamClient

    async def put(self, data: bytes, key: str) -> tuple[str, int]: ...
    async def split(self, shard_id: str, at: int) -> None: ...


class MemoryBackend:
    def __init__(self, shards: int) -> None:
        self.fake = MemoryStream(shards)
        self.stream: StreamClient = self.fake

    async def put(self, data: bytes, key: str) -> tuple[str, int]:
        return self.fake.put(data, key)

    async def split(self, shard_id: str, at: int) -> None:
        self.fake.split(shard_id, at)


class KinesisBackend:
    def __init__(self, client: KinesisClient, name: str) -> None:
        self.client = client
        self.name = name
        self.stream: StreamClient = KinesisStream(client, name)

    async def wait_active(self) -> None:
        for _ in range(300):
            summary = await self.client.describe_stream_summary(StreamName=self.name)
            if summary["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                return
            await asyncio.sleep(0.05)
        raise AssertionError("stream never became ACTIVE")

    async def put(self, data: bytes, key: str) -> tuple[str, int]:
        out = await self.client.put_record(StreamName=self.name, Data=data, PartitionKey=key)
        return out["ShardId"], int(out["SequenceNumber"])

    async def split(self, shard_id: str, at: int) -> None:
        await self.client.split_shard(
            StreamName=self.name, ShardToSplit=shard_id, NewStartingHashKey=str(at)
        )
        await self.wait_active()


@pytest.fixture(params=["memory", pytest.param("kinesis", marks=pytest.mark.emulator)])
def clients(request: pytest.FixtureRequest) -> Clients | None:
    """None for the in-memory fake; the emulator's clients for kinesalite, requested
    only then, so that the memory variant boots no emulator (and runs in `make test-fast`)."""
    if request.param == "memory":
        return None
    aws: Clients = request.getfixturevalue("aws_clients")
    return aws


@pytest.fixture
async def backend(clients: Clients | None) -> AsyncIterator[Backend]:
    """A fresh 2-shard stream on each backend."""
    if clients is None:
        yield MemoryBackend(2)
        return
    name = f"contract-{uuid.uuid4().hex[:10]}"
    kinesis = KinesisBackend(clients.kinesis, name)
    await clients.kinesis.create_stream(StreamName=name, ShardCount=2)
    await kinesis.wait_active()
    yield kinesis


async def _read_all(
    stream: StreamClient, shard_id: str, start: StartAt, until_end: bool = False
) -> tuple[list[int], bool]:
    """Sequence numbers from ``start`` until caught up (or the end); True if it ended.

    A closed shard may answer with empty pages before the one without a next
    iterator, so reading a closed shard goes on until that page.
    """
    iterator: str | None = await stream.get_iterator(shard_id, start)
    sequences: list[int] = []
    for _ in range(50):
        assert iterator is not None
        page = await stream.get_records(iterator, 1000)
        sequences.extend(r.sequence for r in page.records)
        iterator = page.next_iterator
        if iterator is None:
            return sequences, True
        if not until_end and not page.records and not page.millis_behind:
            return sequences, False
    raise AssertionError("never caught up")


async def test_lists_open_shards_without_parents(backend: Backend) -> None:
    """A new stream lists its shards, open, with no parents."""
    shards = await backend.stream.list_shards()
    assert len(shards) == 2
    assert all(not s.closed and not s.parents for s in shards)


async def test_reads_back_in_order_with_integer_sequences(backend: Backend) -> None:
    """Records come back per shard in put order; sequence numbers are big ints."""
    puts = [await backend.put(f"r{i}".encode(), f"key-{i}") for i in range(20)]
    for shard in await backend.stream.list_shards():
        expected = [seq for sid, seq in puts if sid == shard.shard_id]
        got, ended = await _read_all(backend.stream, shard.shard_id, StartAt())
        assert got == expected
        assert got == sorted(got)
        assert not ended
    assert all(seq > 10**40 for _, seq in puts)


async def test_at_sequence_number_is_inclusive_and_latest_skips_the_past(backend: Backend) -> None:
    """AT_SEQUENCE_NUMBER starts at that record; LATEST sees only later puts."""
    shard_id, _ = await backend.put(b"a", "same-key")
    _, second = await backend.put(b"b", "same-key")
    _, third = await backend.put(b"c", "same-key")
    got, _ = await _read_all(
        backend.stream, shard_id, StartAt(kind=None, position=Position(second))
    )
    assert got == [second, third]
    latest = await backend.stream.get_iterator(shard_id, StartAt(kind=Sentinel.LATEST))
    _, fourth = await backend.put(b"d", "same-key")
    page = await backend.stream.get_records(latest, 100)
    assert [r.sequence for r in page.records] == [fourth]


async def test_split_closes_parent_which_ends(backend: Backend) -> None:
    """After a split the parent is closed and reading it ends; children name it."""
    shards = await backend.stream.list_shards()
    parent = shards[0].shard_id
    _, before = await backend.put(b"x", "k")
    await backend.split(parent, MAX_HASH // 8)
    listed = {s.shard_id: s for s in await backend.stream.list_shards()}
    children = [s for s in listed.values() if parent in s.parents]
    assert len(children) == 2
    assert listed[parent].closed
    _, ended = await _read_all(backend.stream, parent, StartAt(), until_end=True)
    assert ended
    assert before
