"""Enhanced fan-out on the in-memory stream: what kinesis-local cannot show.

:class:`MemoryFanOut` keeps the :class:`~consumer.stream.fanout.FanOutClient` contract
(the same contract tests run against it and kinesis-local) and adds what no emulator
does: child shards at a shard's end, the five-second takeover of a subscription,
a configurable subscription lifetime, and faults (silent subscriptions, invalid
events, errors in the event stream).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from consumer.stream import StartAt, StreamError, StreamNotFoundError
from consumer.stream.fanout import (
    ChildShard,
    ShardEvent,
    StreamConsumer,
    SubscriptionInUseError,
)
from consumer.stream.memory import SEQUENCE_BASE, MemoryStream

TAKEOVER_SECONDS = 5.0
"""A second SubscribeToShard for the same consumer and shard within this time of the
last is refused (ResourceInUse); after it, the new one takes the subscription over."""


@dataclass
class Faults:
    """What the next subscriptions do wrong (each list is consumed in order)."""

    subscribe: list[StreamError] = field(default_factory=list)
    """Errors SubscribeToShard raises before any event."""
    in_stream: list[StreamError] = field(default_factory=list)
    """Errors raised inside an event stream, after its first event."""
    silent: int = 0
    """Subscriptions that send nothing at all, not even empty events."""
    invalid_ends: int = 0
    """Shard-end events sent without child shards (KCL's invalid combination)."""
    false_ends: int = 0
    """Events that claim the end (no continuation, no child shards) of an open shard."""
    endless: bool = False
    """Closed shards never end their subscriptions (kinesis-local): empty events for ever."""


class MemoryFanOut:
    """Stream consumers and SubscribeToShard over a :class:`MemoryStream`."""

    def __init__(
        self,
        stream: MemoryStream,
        *,
        event_interval: float = 0.02,
        lifetime: float = 300.0,
        activation_describes: int = 0,
        takeover_seconds: float = TAKEOVER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.event_interval = event_interval
        self.lifetime = lifetime
        """Seconds a subscription lives (AWS: five minutes)."""
        self.activation_describes = activation_describes
        """Describes that still show a new consumer CREATING."""
        self.takeover_seconds = takeover_seconds
        self.clock = clock
        self.faults = Faults()
        self.consumers: dict[str, StreamConsumer] = {}
        self._describes: dict[str, int] = {}
        self._live: dict[tuple[str, str], _Subscription] = {}
        self.subscribe_calls = 0

    async def register_consumer(self, name: str) -> StreamConsumer:
        """Register (or describe) a consumer; CREATING for ``activation_describes``."""
        if name not in self.consumers:
            arn = f"arn:aws:kinesis:us-east-1:000000000000:stream/memory/consumer/{name}:1"
            self.consumers[name] = StreamConsumer(name, arn, "CREATING")
            self._describes[name] = 0
        return await self.describe_consumer(name) or self.consumers[name]

    async def describe_consumer(self, name: str) -> StreamConsumer | None:
        """The consumer by name; ACTIVE after ``activation_describes`` describes."""
        found = self.consumers.get(name)
        if found is None:
            return None
        self._describes[name] += 1
        if found.status == "CREATING" and self._describes[name] > self.activation_describes:
            found = self.consumers[name] = StreamConsumer(name, found.arn, "ACTIVE")
        return found

    async def deregister_consumer(self, name: str) -> bool:
        """Forget the consumer; its live subscriptions end with an error."""
        found = self.consumers.pop(name, None)
        if found is None:
            return False
        for key, sub in list(self._live.items()):
            if key[0] == found.arn:
                sub.failure = StreamNotFoundError(f"consumer {name} was deregistered")
        return True

    async def subscribe(
        self, consumer_arn: str, shard_id: str, start: StartAt, after: int | None = None
    ) -> _Subscription:
        """A subscription from ``start`` (or after ``after``), with AWS's refusals."""
        self.subscribe_calls += 1
        if self.faults.subscribe:
            raise self.faults.subscribe.pop(0)
        consumer = next((c for c in self.consumers.values() if c.arn == consumer_arn), None)
        if consumer is None:  # AWS: ResourceNotFound, as for a shard
            raise StreamNotFoundError(f"consumer {consumer_arn} not found")
        if consumer.status != "ACTIVE":
            raise SubscriptionInUseError(f"{consumer.name} is {consumer.status}")
        shard = self.stream.shard(shard_id)
        if shard is None:
            raise StreamNotFoundError(shard_id)
        key = (consumer_arn, shard_id)
        now = self.clock()
        previous = self._live.get(key)
        if previous is not None and not previous.expired:
            # Closed by the client or not: the service counts it live for a while.
            if now - previous.started < self.takeover_seconds:
                raise SubscriptionInUseError(f"{shard_id} already has a live subscription")
            previous.failure = SubscriptionInUseError("taken over by a newer subscription")
        if after is not None:
            index = sum(1 for r in shard.records if r.sequence <= after)
        else:
            index = self.stream.index_at(shard, start)
        sub = _Subscription(self, shard_id, index, now)
        if self.faults.silent:
            self.faults.silent -= 1
            sub.silent = True
        self._live[key] = sub
        return sub


class _Subscription:
    def __init__(self, owner: MemoryFanOut, shard_id: str, index: int, started: float) -> None:
        self.owner = owner
        self.shard_id = shard_id
        self.index = index
        self.started = started
        self.closed = False
        self.expired = False
        """Ended by the service (its lifetime, or the shard's end): not live any more."""
        self.silent = False
        self.failure: StreamError | None = None
        self.sent = 0

    async def events(self) -> AsyncIterator[ShardEvent]:
        owner = self.owner
        while not self.closed:
            if self.failure is not None:
                raise self.failure
            if owner.clock() - self.started >= owner.lifetime:
                self.closed = self.expired = True
                return
            await asyncio.sleep(owner.event_interval)
            if self.silent or self.closed:
                continue
            if self.sent and owner.faults.in_stream:
                self.closed = self.expired = True  # the service ended it
                raise owner.faults.in_stream.pop(0)
            event = self._next_event()
            self.sent += 1
            yield event
            if event.continuation is None:
                self.closed = self.expired = True
                return

    def _next_event(self) -> ShardEvent:
        shard = self.owner.stream.shard(self.shard_id)
        assert shard is not None
        if self.owner.faults.false_ends and not shard.closed:
            self.owner.faults.false_ends -= 1
            return ShardEvent([], None, 0, None)
        records = shard.records[self.index : self.index + 10_000]
        self.index += len(records)
        if shard.closed and self.index >= len(shard.records) and not self.owner.faults.endless:
            children: tuple[ChildShard, ...] | None = tuple(
                ChildShard(s.shard_id, s.parents) for s in self.owner.stream.children(self.shard_id)
            )
            if self.owner.faults.invalid_ends:
                self.owner.faults.invalid_ends -= 1
                children = None
            return ShardEvent(records, None, 0, children)
        latest = shard.records[self.index - 1].sequence if self.index else SEQUENCE_BASE
        behind = 0 if self.index >= len(shard.records) else 1000
        return ShardEvent(records, latest, behind)

    async def close(self) -> None:
        self.closed = True
