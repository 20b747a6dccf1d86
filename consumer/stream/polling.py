"""The ``polling`` read mode: GetRecords on each shard
(:class:`~consumer.stream.reader.ShardReader`).

It needs nothing started: at most ``LANDER_MAX_RECORDS_PER_CALL`` records a call, every
``LANDER_POLL_IDLE_SECONDS`` when a shard is idle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer.stream.reader import ShardReader
from consumer.stream.readers import BatchReader, ModeState, ReaderFactory, ShardRead, StreamOpening

if TYPE_CHECKING:
    from consumer.config import Settings


def polling(*, limit: int = 10_000, idle_seconds: float = 1.0) -> ReaderFactory:
    """GetRecords, at most ``limit`` records a call, every ``idle_seconds`` when idle."""

    def reader(read: ShardRead) -> BatchReader:
        return ShardReader(
            read.stream,
            read.shard_id,
            read.checkpoint,
            timestamp=read.timestamp,
            limit=limit,
            idle_seconds=idle_seconds,
            stopping=read.stopping,
            metrics=read.metrics,
            stream_name=read.stream_name,
        )

    return reader


def reader_of(settings: Settings) -> ReaderFactory:
    """The polling reader as ``settings`` pace it."""
    return polling(limit=settings.max_records_per_call, idle_seconds=settings.poll_idle_seconds)


class Polling:
    """The mode object (:class:`~consumer.stream.readers.ReadMode`)."""

    async def start(self, opening: StreamOpening) -> ReaderFactory:
        return reader_of(opening.settings)

    async def describe(self, opening: StreamOpening) -> ModeState:
        return ModeState("polling", via="GetRecords")


MODE = Polling()
