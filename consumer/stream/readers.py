"""The read modes behind one interface: how a shard's records reach its consumer.

A read mode is a :data:`ReaderFactory`: given what reading one shard takes
(:class:`ShardRead`), it makes a :class:`BatchReader`, whose ``batches()`` yields
:class:`~consumer.stream.reader.Batch` es from the checkpoint on, each record once, until
the shard ends or ``stopping`` is set. The lifecycle knows these names only; a lane of
a worker carries its stream's factory.

- ``polling`` (:func:`polling`): GetRecords, :class:`~consumer.stream.reader.ShardReader`;
- ``efo`` (:func:`fanout`): SubscribeToShard through a registered stream consumer,
  :class:`~consumer.stream.subscriber.SubscriptionReader`, once the consumer is ACTIVE
  (``lander`` registers it at start, :mod:`consumer.cli.efo`).

A new read mode is a module with a reader and a factory like these.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from consumer.sequence import Checkpoint
from consumer.stream import StreamClient
from consumer.stream.fanout import FanOutReading
from consumer.stream.reader import Batch, ShardReader
from consumer.stream.subscriber import END_CHECK_SECONDS, SubscriptionReader

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

__all__ = ["Batch", "BatchReader", "ReaderFactory", "ShardRead", "fanout", "polling"]


class BatchReader(Protocol):
    """One shard's records, batch by batch."""

    def batches(self) -> AsyncGenerator[Batch, None]:
        """Yield batches until the shard ends or the reader is asked to stop."""


@dataclass(frozen=True, slots=True)
class ShardRead:
    """What reading one shard takes, whatever the mode."""

    stream: StreamClient
    shard_id: str
    checkpoint: Checkpoint
    """Where to resume: the records at or before it are not yielded again."""
    stopping: asyncio.Event
    """Set to stop after the batch in hand."""
    timestamp: datetime | None = None
    """With an AT_TIMESTAMP checkpoint: the timestamp."""
    metrics: LanderMetrics | None = None
    stream_name: str | None = None
    """The ``stream`` label of the shard's series and logs."""


ReaderFactory = Callable[[ShardRead], BatchReader]
"""A read mode: makes the reader of one shard."""


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


def fanout(
    reading: FanOutReading, *, end_check_seconds: float = END_CHECK_SECONDS
) -> ReaderFactory:
    """SubscribeToShard through ``reading``'s ACTIVE consumer; a quiet shard is asked
    whether it ended every ``end_check_seconds``."""

    def reader(read: ShardRead) -> BatchReader:
        return SubscriptionReader(
            read.stream,
            reading.client,
            reading.consumer,
            read.shard_id,
            read.checkpoint,
            timestamp=read.timestamp,
            stopping=read.stopping,
            metrics=read.metrics,
            end_check_seconds=end_check_seconds,
            stream_name=read.stream_name,
        )

    return reader
