"""The streams a worker consumes: one lane per stream, and the watch that adds and
retires lanes as streams appear and go.

A lane holds what reading one stream takes: its client, its processors (built from the
stream's own settings), where a new lease starts, and its shard syncer. A worker of a
single stream has one lane, keyed ``None``: its leases are keyed by shard id alone. A
worker of several streams (``LANDER_STREAMS``) has a lane per stream, keyed by the
stream's :class:`~consumer.leases.keys.StreamId`, and its leases carry the stream in
the key as KCL's multi-stream mode writes them.

:class:`StreamWatch` lists the streams every ``LANDER_STREAMS_SYNC_SECONDS`` and plans
(:func:`consumer.stream.streams.plan_streams`, pure) which lanes to open and which to
retire: a stream that no longer matches, or was deleted, is retired after three
listings without it. A retired stream's leases stay in the table, unowned, with their
checkpoints (as KCL's default keeps them): a stream that matches again resumes where
it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from consumer.errors import RefusedError
from consumer.leases.keys import StreamId, split_key
from consumer.lifecycle.processor import ProcessorFactory
from consumer.sequence import Sentinel
from consumer.stream import StreamClient
from consumer.stream.modes import unstarted
from consumer.stream.readers import ReaderFactory
from consumer.stream.shards import ShardSyncer
from consumer.stream.streams import Listed, StreamChoice, plan_streams

log = structlog.get_logger("consumer.lifecycle.lanes")

GRACE_LISTINGS = 3
"""Listings in a row without a consumed stream before its lane is retired."""


@dataclass(eq=False)
class Lane:
    """One stream a worker consumes."""

    stream_id: StreamId | None
    """None: the only stream of a single-stream table."""
    name: str
    client: StreamClient
    factory: ProcessorFactory
    initial: Sentinel = Sentinel.TRIM_HORIZON
    """Where the lease of a shard without a parent starts (LANDER_INITIAL_POSITION)."""
    timestamp: datetime | None = None
    """With AT_TIMESTAMP: the timestamp."""
    reader: ReaderFactory = field(default_factory=unstarted)
    """The stream's read mode, started (:mod:`consumer.stream.modes`)."""
    syncer: ShardSyncer | None = field(default=None, repr=False)
    """Set by the worker for its coordination mode."""
    listed: set[str] | None = None
    """Lease keys of the shards the last successful listing found (None: not listed yet)."""
    missing: int = 0
    """Shard listings in a row that found no stream."""
    incomplete: bool = False


class Lanes:
    """The lanes of a worker, found by stream or by lease key."""

    def __init__(self, lanes: Iterable[Lane]) -> None:
        self.by_id: dict[StreamId | None, Lane] = {lane.stream_id: lane for lane in lanes}

    def __iter__(self) -> Iterator[Lane]:
        """Over a copy: a pass may add or retire lanes."""
        return iter(list(self.by_id.values()))

    def __len__(self) -> int:
        return len(self.by_id)

    @property
    def multi(self) -> bool:
        """True when leases carry their stream (a multi-stream table)."""
        return any(stream is not None for stream in self.by_id)

    def add(self, lane: Lane) -> None:
        self.by_id[lane.stream_id] = lane

    def remove(self, stream: StreamId | None) -> Lane | None:
        return self.by_id.pop(stream, None)

    def of_key(self, key: str) -> tuple[Lane, str] | None:
        """The lane of a lease and the lease's shard id (None: a stream not consumed)."""
        try:
            stream, shard = split_key(key)
        except ValueError:
            return None
        lane = self.by_id.get(stream)
        return None if lane is None else (lane, shard)

    def consumes(self, key: str) -> bool:
        """Whether this worker reads the lease's stream."""
        return self.of_key(key) is not None

    def listed(self) -> set[str] | None:
        """Lease keys of every lane's listed shards; None until every lane was listed
        once (a child is only ready once its parents' stream has been listed)."""
        keys: set[str] = set()
        for lane in self.by_id.values():
            if lane.listed is None:
                return None
            keys |= lane.listed
        return keys


StreamLister = Callable[[], Awaitable[list[Listed]]]
LaneMaker = Callable[[StreamId], Awaitable[Lane]]


class StreamWatch:
    """Which streams a multi-stream worker consumes, re-evaluated at each listing."""

    def __init__(
        self,
        choice: StreamChoice,
        lister: StreamLister,
        make_lane: LaneMaker,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.choice = choice
        self.lister = lister
        self.make_lane = make_lane
        self.interval = interval
        self.grace = GRACE_LISTINGS * interval
        self.clock = clock
        self.missing_since: dict[StreamId, float] = {}

    async def plan(self, lanes: Lanes) -> tuple[list[Lane], list[StreamId]]:
        """List the streams: lanes to open (made here) and streams to retire."""
        listed = await self.lister()
        consumed = [stream for stream in lanes.by_id if stream is not None]
        plan = plan_streams(
            consumed,
            listed,
            self.choice,
            now=self.clock(),
            missing_since=self.missing_since,
            grace_seconds=self.grace,
        )
        # A name listed with another creation time is a stream created again: the old
        # lane goes at once, as its client (which reads by name) would read the new one.
        renamed = {stream.name for stream in plan.start}
        replaced = [s for s in plan.missing_since if s.name in renamed]
        missing = {s: t for s, t in plan.missing_since.items() if s not in replaced}
        for stream in missing:
            if stream not in self.missing_since:
                log.warning("consumed stream not listed", stream=stream.serialized)
        self.missing_since = missing
        opened = []
        for stream in plan.start:
            refused = None
            try:
                opened.append(await self.make_lane(stream))
            except RefusedError as exc:  # a condition with its one line (a landing refused)
                refused = str(exc)
            except Exception:  # one stream's lane must not stop the others
                log.exception(
                    "stream not opened; the next listing tries again", stream=stream.serialized
                )
            if refused is not None:
                log.error(
                    "stream not opened; the next listing tries again",
                    stream=stream.serialized,
                    reason=refused,
                )
        return opened, sorted([*plan.retire, *replaced])
