"""What the analysis found, as plain data: the analyse job fills it, the report draws it.

Nothing here imports Spark, so the report can be rendered and tested without a JVM.
Times are timezone-aware UTC datetimes; durations are milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class VolumePoint:
    """Records of one shard that arrived in one bucket of time, from ``start`` on
    (:attr:`Analysis.volume_seconds` wide)."""

    start: datetime
    shard_id: str
    records: int
    bytes: int


@dataclass(frozen=True, slots=True)
class DuplicateStat:
    """What compaction removed from one hour of landed records."""

    hour: datetime
    input_rows: int
    transport: int
    producer: int
    output_rows: int
    sequence: int = 0
    """Removed by producer sequence (no event id): counted apart from ``producer``."""


@dataclass(frozen=True, slots=True)
class Lateness:
    """Percentiles of one delay, over one hour or (hour None) the whole window.

    ``kind`` is ``landing`` (landed minus arrival) or ``event`` (arrival minus the
    payload's event time).
    """

    kind: str
    hour: datetime | None
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class ShardShare:
    """One shard's part of the window's records."""

    shard_id: str
    records: int
    share: float


@dataclass(frozen=True, slots=True)
class HotKey:
    """A partition key among the busiest, with its weight on its shard."""

    partition_key: str
    shard_id: str
    records: int
    share_of_shard: float
    share_of_stream: float


@dataclass(frozen=True, slots=True)
class SequenceGaps:
    """Gaps and reorders in one producer's sequence field (one partition key)."""

    producer: str
    records: int
    first: int
    last: int
    gaps: int
    missing: int
    reorders: int


@dataclass(frozen=True, slots=True)
class BadInput:
    """A landed file, or lines in it, that could not be read as records.

    ``kind``: ``truncated`` (the gzip stream ends early; complete lines kept),
    ``corrupt`` (not gzip, bad data or checksum; its rows are left out), or
    ``malformed`` (lines that are not a landed record).
    """

    file: str
    kind: str
    count: int
    detail: str


@dataclass(frozen=True, slots=True)
class DeadLetterStat:
    """Dead letters of the window with one reason."""

    reason: str
    records: int


@dataclass(frozen=True, slots=True)
class RescuedStat:
    """Payload values of the window at one place (a JSON Pointer) that fit no typed
    column and are kept in ``rescued`` (issue 48)."""

    place: str
    values: int


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything one run of the analyse job found about one window of one stream."""

    stream: str
    window: str
    generated_at: datetime
    records: int
    bytes: int
    volume: list[VolumePoint] = field(default_factory=list)
    volume_seconds: int = 60
    """How wide ``volume``'s buckets are: chosen from the span of the data
    (:func:`sparkjobs.analysis.charts.bucket_seconds`), a second for a minute of it."""
    duplicates: list[DuplicateStat] = field(default_factory=list)
    remaining_duplicates: int = 0
    lateness: list[Lateness] = field(default_factory=list)
    shards: list[ShardShare] = field(default_factory=list)
    hot_keys: list[HotKey] = field(default_factory=list)
    sequence_field: str | None = None
    gaps: list[SequenceGaps] = field(default_factory=list)
    event_time_field: str | None = None
    bad_inputs: list[BadInput] = field(default_factory=list)
    dead_letters: list[DeadLetterStat] = field(default_factory=list)
    rescued: list[RescuedStat] = field(default_factory=list)
    tables: str | None = None
