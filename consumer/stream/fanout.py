"""Enhanced fan-out: the SubscribeToShard read mode's interface and its pure rules.

A registered stream consumer gets its own 2 MB/s per shard, pushed over an HTTP event
stream: one ``SubscribeToShardEvent`` per batch (records, a continuation sequence
number, how far behind), for at most five minutes per subscription. The backends are
:mod:`.kinesis_fanout` (aiobotocore) and :class:`.memory.MemoryStream`; the reader
that turns subscriptions into the polling reader's batches is :mod:`.subscriber`.

The rules here are KCL's (``FanOutRecordsPublisher``), kept pure so they can be
property-tested:

- a subscription resumes *after* the continuation sequence number of the last event
  handed on (it covers every record of that event, and a quiet shard's progress), or,
  before any event, where the reader was asked to start;
- an event either continues the shard (a continuation, no child shards) or ends it
  (no continuation, child shards naming this shard as a parent); anything else is
  invalid and the subscription is restarted, never taken as the end of the shard.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from consumer.sequence import Sentinel
from consumer.stream import KinesisRecord, StartAt, StreamError


@dataclass(frozen=True, slots=True)
class ChildShard:
    """A shard that follows a closed one, as a shard-end event names it."""

    shard_id: str
    parents: frozenset[str]


@dataclass(frozen=True, slots=True)
class ShardEvent:
    """One ``SubscribeToShardEvent``."""

    records: list[KinesisRecord]
    continuation: int | None
    """``ContinuationSequenceNumber``: None only at the end of a closed shard."""
    millis_behind: int | None
    children: tuple[ChildShard, ...] | None = None
    """``ChildShards``: only at a shard's end (None when the service sent none)."""


@dataclass(frozen=True, slots=True)
class StreamConsumer:
    """A registered stream consumer (``RegisterStreamConsumer``)."""

    name: str
    arn: str
    status: str
    """CREATING, ACTIVE or DELETING."""


class SubscriptionInUseError(StreamError):
    """``ResourceInUseException``: another subscription to this shard for this consumer
    is live (a second call within five seconds of the last), or the consumer is not
    ACTIVE yet. Back off and subscribe again; after five seconds the new call takes
    the subscription over."""

    retriable = True


class ConsumerNotFoundError(StreamError):
    """The stream consumer is not registered (deleted, or never created)."""


class Subscription(Protocol):
    """One SubscribeToShard call's event stream; ends when the service closes it."""

    def events(self) -> AsyncIterator[ShardEvent]:
        """The events in order; errors in the stream raise :class:`StreamError`s."""

    async def close(self) -> None:
        """Stop reading and close the connection (idempotent)."""


class FanOutClient(Protocol):
    """What the efo read mode needs from Kinesis beyond :class:`.StreamClient`."""

    async def register_consumer(self, name: str) -> StreamConsumer:
        """Register the stream consumer, or describe it if it exists."""

    async def describe_consumer(self, name: str) -> StreamConsumer | None:
        """The consumer by name, None if it is not registered."""

    async def deregister_consumer(self, name: str) -> bool:
        """Deregister the consumer; False if it was not registered."""

    async def subscribe(
        self, consumer_arn: str, shard_id: str, start: StartAt, after: int | None = None
    ) -> Subscription:
        """SubscribeToShard at ``start``, or after the sequence number ``after``."""


def starting_position(start: StartAt, after: int | None) -> dict[str, object]:
    """The API's ``StartingPosition``: after a continuation when there is one (the
    reader has handed on everything up to it), else where the reader was asked to
    start (AT_SEQUENCE_NUMBER of a checkpoint: the reader drops what it already has)."""
    if after is not None:
        return {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": str(after)}
    if start.position is not None:
        return {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": str(start.position.sequence)}
    if start.kind is Sentinel.AT_TIMESTAMP:
        return {"Type": "AT_TIMESTAMP", "Timestamp": start.timestamp}
    return {"Type": str(start.kind or Sentinel.TRIM_HORIZON)}


class Verdict(enum.Enum):
    """What an event means for the shard."""

    CONTINUE = "continue"
    SHARD_END = "shard_end"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Judged:
    verdict: Verdict
    reason: str = ""
    children: tuple[ChildShard, ...] = field(default_factory=tuple)


def judge(shard_id: str, event: ShardEvent) -> Judged:
    """Whether an event continues the shard, ends it, or cannot be trusted (KCL's
    check): the end is a missing continuation *with* child shards that descend from
    this shard; a continuation with child shards, or neither, is invalid."""
    children = tuple(event.children or ())
    if event.continuation is None:
        if not children:
            return Judged(Verdict.INVALID, "no continuation and no child shards")
        strangers = sorted(c.shard_id for c in children if shard_id not in c.parents)
        if strangers:
            return Judged(
                Verdict.INVALID, f"child shards not descended from {shard_id}: {strangers}"
            )
        return Judged(Verdict.SHARD_END, children=children)
    if children:
        return Judged(Verdict.INVALID, "child shards with a continuation")
    return Judged(Verdict.CONTINUE)


@dataclass(frozen=True, slots=True)
class FanOutReading:
    """What a worker in efo mode reads with: the client and its ACTIVE consumer."""

    client: FanOutClient
    consumer: StreamConsumer


class ConsumerNotActiveError(StreamError):
    """The stream consumer did not become ACTIVE in time (or could not be registered)."""


async def ensure_consumer(
    fanout: FanOutClient,
    name: str,
    *,
    within: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> StreamConsumer:
    """Register ``name`` (or find it) and wait until it is ACTIVE, for at most
    ``within`` seconds. A consumer being deleted is waited out and registered again;
    retriable errors (RegisterStreamConsumer allows five calls a second per stream, and
    a fleet starts at once) are retried until then; others are raised as they come."""
    deadline = clock() + within
    delay = 0.25
    last = "not registered"
    while True:
        try:
            found = await fanout.describe_consumer(name)
            if found is None:
                found = await fanout.register_consumer(name)
            if found.status == "ACTIVE":
                return found
            last = found.status
        except StreamError as exc:
            if not exc.retriable:
                raise
            last = f"failing: {exc}"
        if clock() >= deadline:
            raise ConsumerNotActiveError(
                f"stream consumer {name!r} is not ACTIVE after {within:g} s ({last})"
            )
        await sleep(delay)
        delay = min(2.0, delay * 2)
