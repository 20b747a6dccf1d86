"""The read modes behind one interface: how a shard's records reach its consumer.

A read mode is a :class:`ReadMode`: started once per stream at a worker's start
(:meth:`ReadMode.start`: a fan-out consumer registered, a client of its own opened), it
gives a :data:`ReaderFactory`, which makes, for each shard (:class:`ShardRead`), a
:class:`BatchReader`, whose ``batches()`` yields :class:`~consumer.stream.reader.Batch`
es from the checkpoint on, each record once, until the shard ends or ``stopping`` is
set. :meth:`ReadMode.describe` says how the mode stands, for ``lander status`` and
``lander run --check``.

The lifecycle knows these names only. The modes are modules of their own, registered
by name in :mod:`consumer.stream.modes` (``LANDER_READ_MODE``):

- ``polling`` (:mod:`consumer.stream.polling`): GetRecords;
- ``efo`` (:mod:`consumer.stream.efo`): SubscribeToShard through a registered stream
  consumer.

A new read mode is a module with a mode object like theirs and one line in the registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from consumer.errors import RefusedError
from consumer.sequence import Checkpoint
from consumer.stream import StreamClient
from consumer.stream.reader import Batch

if TYPE_CHECKING:
    from consumer.config import Settings
    from consumer.metrics import LanderMetrics

__all__ = [
    "Batch",
    "BatchReader",
    "ModeStartError",
    "ModeState",
    "ReadMode",
    "ReaderFactory",
    "ShardRead",
    "StreamOpening",
]


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
"""A started read mode: makes the reader of one shard."""


@dataclass(frozen=True, slots=True)
class StreamOpening:
    """What starting (or describing) a read mode for one stream takes."""

    settings: Settings
    """The stream's own settings."""
    stream: str
    """The stream's name."""
    kinesis: Any
    """The worker's Kinesis client (aiobotocore)."""
    exits: AsyncExitStack | None = None
    """Where a mode closes what it opened (a client of its own) when the worker ends;
    None to describe only."""
    several: bool = False
    """Whether the worker reads several streams (the stream is then named in messages)."""


@dataclass(frozen=True, slots=True)
class ModeState:
    """How a stream's read mode stands, as ``lander status`` shows it."""

    mode: str
    via: str | None = None
    """What the mode reads through, in words (shown when there is no consumer)."""
    consumer: str | None = None
    """The stream consumer (efo), if the mode reads through one."""
    status: str | None = None
    arn: str | None = None
    would: str | None = None
    """What starting a worker would change (e.g. register the consumer), or None."""
    problem: str | None = None
    """Why the mode could not start at all (``run --check`` refuses with it), or None."""

    def as_dict(self) -> dict[str, str | None]:
        """The ``read_mode`` of ``lander status --json``."""
        if self.consumer is None:
            return {"mode": self.mode}
        return {
            "mode": self.mode,
            "consumer": self.consumer,
            "status": self.status,
            "arn": self.arn,
        }

    def line(self) -> str:
        """One line for the status table."""
        if self.consumer is None:
            return f"read mode: {self.mode}" + (f" ({self.via})" if self.via else "")
        arn = f" {self.arn}" if self.arn else ""
        problem = f" ({self.problem})" if self.problem else ""
        return (
            f"read mode: {self.mode}, stream consumer {self.consumer}: {self.status}{arn}{problem}"
        )


class ModeStartError(RefusedError):
    """A read mode could not be started for a stream (its consumer not made ready)."""


class ReadMode(Protocol):
    """One way of reading a stream's shards."""

    async def start(self, opening: StreamOpening) -> ReaderFactory:
        """Make the mode ready for the stream; raises :class:`ModeStartError` with one
        line when it cannot be."""

    async def describe(self, opening: StreamOpening) -> ModeState:
        """How the mode stands for the stream now (nothing changed)."""
