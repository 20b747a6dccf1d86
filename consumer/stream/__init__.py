"""The reading side: the Kinesis stream as a narrow interface (this module) with its
backends (:mod:`.kinesis`, :mod:`.memory`), user records and KPL de-aggregation
(:mod:`.records`, :mod:`.kpl`), the read modes (:mod:`.readers` the seam, :mod:`.modes`
the registry, :mod:`.polling` over one shard's GetRecords loop in :mod:`.reader`,
:mod:`.efo` over subscriptions), shard discovery with lineage (:mod:`.shards`) and the
response parsers (:mod:`.fastparse`, :mod:`.eventstream`). May import consumer.aws, errors, sequence
and leases (shard discovery creates leases); never the lifecycle or the lander.

The interface: list shards, get an iterator, get records.

Errors form a small tree (a branch of :mod:`consumer.errors`), with retry policy
carried on the class::

    StreamError
    ├── IteratorExpiredError   (retriable: get a new iterator at the last position)
    ├── ThrottledError         (retriable: back off with jitter)
    ├── TransientStreamError   (retriable: 5xx, timeouts, connection resets)
    └── StreamNotFoundError    (not retriable here: the stream is gone or misnamed)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from consumer.errors import LanderError
from consumer.sequence import Position, Sentinel


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard as ListShards reports it."""

    shard_id: str
    parents: frozenset[str] = field(default_factory=frozenset)
    closed: bool = False


@dataclass(slots=True)
class KinesisRecord:
    """One record as GetRecords returns it (possibly a KPL aggregate)."""

    sequence: int
    partition_key: str
    data: bytes
    arrival: datetime
    explicit_hash_key: str | None = None


@dataclass(frozen=True, slots=True)
class RecordsPage:
    """One GetRecords response. ``next_iterator`` is None at the end of a closed shard."""

    records: list[KinesisRecord]
    next_iterator: str | None
    millis_behind: int | None


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where to open a shard iterator."""

    kind: Sentinel | None = Sentinel.TRIM_HORIZON
    """TRIM_HORIZON, LATEST or AT_TIMESTAMP; None for AT_SEQUENCE_NUMBER."""
    position: Position | None = None
    timestamp: datetime | None = None


class StreamError(LanderError):
    """A Kinesis call failed."""

    retriable = False


class IteratorExpiredError(StreamError):
    """The shard iterator is older than five minutes."""

    retriable = True


class ThrottledError(StreamError):
    """ProvisionedThroughputExceeded or LimitExceeded."""

    retriable = True


class FanOutUnsupportedError(StreamError):
    """The Kinesis endpoint does not serve enhanced fan-out (an emulator such as
    kinesalite answers the consumer calls with UnknownOperationException)."""


class TransientStreamError(StreamError):
    """A server error, timeout or connection failure."""

    retriable = True


class StreamNotFoundError(StreamError):
    """The stream (or shard) does not exist."""


class StreamClient(Protocol):
    """What the worker needs from Kinesis."""

    async def list_shards(self) -> list[Shard]:
        """Every shard of the stream, all pages."""

    async def get_iterator(self, shard_id: str, start: StartAt) -> str:
        """A shard iterator at ``start``."""

    async def get_records(self, iterator: str, limit: int) -> RecordsPage:
        """Up to ``limit`` records from ``iterator``."""
