"""The shard reader on the in-memory stream: resume, expiry, faults, pacing, shard end."""

from __future__ import annotations

import asyncio
import time

import pytest

from consumer.sequence import Position, Sentinel
from consumer.stream import StreamError, ThrottledError, TransientStreamError
from consumer.stream.kpl_encode import aggregate
from consumer.stream.memory import MemoryStream
from consumer.stream.reader import Batch, ShardReader

SHARD = "shardId-000000000000"


async def _drain(reader: ShardReader, max_batches: int = 200) -> list[Batch]:
    batches = []
    async for batch in reader.batches():
        batches.append(batch)
        if batch.shard_end or (not batch.records and len(batches) >= max_batches):
            break
        if not batch.records and batch.millis_behind == 0:
            break
    return batches


def _positions(batches: list[Batch]) -> list[Position]:
    return [r.position for b in batches for r in b.records]


async def test_reads_pages_in_order_and_reports_shard_end() -> None:
    """All records arrive in order over several pages; a closed shard ends the reader."""
    stream = MemoryStream(1)
    sequences = [stream.put(f"{i}".encode(), "k")[1] for i in range(25)]
    stream.split(SHARD, 2**127)
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, limit=10, idle_seconds=0.2)
    batches = [b async for b in reader.batches()]
    assert _positions(batches) == [Position(s) for s in sequences]
    assert batches[-1].shard_end
    assert sum(b.shard_end for b in batches) == 1


async def test_resumes_inside_an_aggregate_after_the_checkpoint() -> None:
    """From checkpoint (seq, 2) of a 5-record aggregate, subrecords 3 and 4 come next."""
    stream = MemoryStream(1)
    _, plain = stream.put(b"before", "k")
    _, agg = stream.put(aggregate([(f"pk{i}", f"u{i}".encode()) for i in range(5)]), "k")
    _, after = stream.put(b"after", "k")
    reader = ShardReader(stream, SHARD, Position(agg, 2), idle_seconds=0.2)
    batches = await _drain(reader)
    assert _positions(batches) == [Position(agg, 3), Position(agg, 4), Position(after, 0)]
    assert [r.data for b in batches for r in b.records] == [b"u3", b"u4", b"after"]
    assert [r.partition_key for b in batches for r in b.records][:2] == ["pk3", "pk4"]
    assert plain < agg


async def test_expired_iterator_resumes_at_last_position_without_loss_or_repeat() -> None:
    """An iterator expiring between calls is reopened where the reader stood."""
    stream = MemoryStream(1)
    sequences = [stream.put(f"{i}".encode(), "k")[1] for i in range(30)]
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, limit=7, idle_seconds=0.2)
    seen: list[Position] = []
    async for batch in reader.batches():
        seen.extend(r.position for r in batch.records)
        stream.expire_iterators()
        if len(seen) >= 30:
            break
    assert seen == [Position(s) for s in sequences]


async def test_throttling_and_server_errors_are_retried() -> None:
    """Throttles and 5xx are retried with backoff; the records still all arrive."""
    stream = MemoryStream(1)
    sequences = [stream.put(f"{i}".encode(), "k")[1] for i in range(5)]
    stream.faults = [ThrottledError("slow down"), TransientStreamError("503"), ThrottledError("x")]
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, idle_seconds=0.2)
    batches = await _drain(reader)
    assert _positions(batches) == [Position(s) for s in sequences]
    assert stream.faults == []


async def test_non_retriable_errors_surface() -> None:
    """An error that retrying cannot fix is raised to the caller, not swallowed."""
    stream = MemoryStream(1)
    stream.faults = [StreamError("AccessDenied")]
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON)
    with pytest.raises(StreamError, match="AccessDenied"):
        await _drain(reader)


async def test_never_more_than_five_calls_per_second() -> None:
    """GetRecords is paced to Kinesis's per-shard limit even with data waiting."""
    stream = MemoryStream(1)
    for i in range(100):
        stream.put(f"{i}".encode(), "k")
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, limit=1, idle_seconds=0.2)
    started = time.monotonic()
    async for _ in reader.batches():
        if time.monotonic() - started >= 1.0:
            break
    elapsed = time.monotonic() - started
    assert stream.get_records_calls <= 5 * elapsed + 1


async def test_bad_aggregate_becomes_one_flagged_record_and_neighbours_flow() -> None:
    """A corrupt KPL aggregate is delivered whole with an error, not dropped or fatal."""
    stream = MemoryStream(1)
    good = aggregate([("a", b"1"), ("b", b"2")])
    corrupt = bytearray(good)
    corrupt[8] ^= 0xFF
    stream.put(b"first", "k")
    _, bad_seq = stream.put(bytes(corrupt), "k")
    stream.put(b"last", "k")
    batches = await _drain(ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, idle_seconds=0.2))
    records = [r for b in batches for r in b.records]
    assert [r.data for r in records] == [b"first", bytes(corrupt), b"last"]
    flagged = records[1]
    assert flagged.position == Position(bad_seq)
    assert flagged.error is not None
    assert flagged.error.startswith("kpl_bad_checksum")
    assert records[0].error is None
    assert records[2].error is None


async def test_stop_interrupts_an_idle_wait() -> None:
    """Asking a caught-up reader to stop takes effect at once, not after the idle nap."""
    stream = MemoryStream(1)
    stopping = asyncio.Event()
    reader = ShardReader(stream, SHARD, Sentinel.LATEST, idle_seconds=30, stopping=stopping)

    async def consume() -> None:
        async for _ in reader.batches():
            stopping.set()

    started = time.monotonic()
    await asyncio.wait_for(consume(), timeout=5)
    assert time.monotonic() - started < 5


async def test_at_timestamp_starts_at_the_first_record_arriving_then() -> None:
    """An AT_TIMESTAMP start skips records that arrived earlier."""
    from datetime import UTC, datetime, timedelta

    stream = MemoryStream(1)
    t0 = datetime(2026, 11, 22, 6, 0, tzinfo=UTC)
    sequences = [
        stream.put(f"{i}".encode(), "k", arrival=t0 + timedelta(minutes=i))[1] for i in range(5)
    ]
    reader = ShardReader(
        stream, SHARD, Sentinel.AT_TIMESTAMP, timestamp=t0 + timedelta(minutes=2), idle_seconds=0.2
    )
    assert _positions(await _drain(reader)) == [Position(s) for s in sequences[2:]]
