"""Runs: consecutive records of one shard in one arrival minute, cut into files.

A run is cut, before the record that would break a rule, when

1. the record's arrival minute differs from the run's (late records included),
2. the run holds ``max_records`` records,
3. the record's line would take the run past ``max_bytes`` (uncompressed),
4. the record arrived ``flush_seconds`` or more after the run's first record;

and, outside the records, when the shard ends, on shutdown, and when a run has been
open ``flush_seconds`` by the worker's clock with nothing new arriving (a quiet shard).
Rules 1-4 read only the records, so a replay from the same place cuts at the same
places and produces the same keys and bytes; rule 4 makes the latency bound a property
of the records for a live stream, and the clock is left only for quiet shards.

A run's range covers every record it consumed, including dead letters and producer
duplicates dropped by the event-id filter, so consecutive runs tile the shard.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from consumer.archive.layout import minute_of
from consumer.landing.deflate import CodecName, Compressor, gzip_stream
from consumer.landing.envelope import DeadLetter
from consumer.sequence import Position
from consumer.stream.records import Record

GZIP_LEVEL = 1
"""Landed files are staging for the nightly Parquet compaction: level 1 costs 40% of
level 6's CPU per record for files about 25% larger (see docs/benchmarks.md)."""
COMPRESS_CHUNK = 64 * 1024
"""Lines are compressed about this many bytes at a time (zlib's output does not depend
on the split; isal's does, which is why replays compare content digests)."""


@dataclass(frozen=True, slots=True)
class LandedRun:
    """A closed run, ready to land."""

    shard_id: str
    minute: datetime
    first: Position
    last: Position
    body: bytes
    """gzip of the JSON lines (possibly no lines: a run of only dead letters)."""
    content_sha256: str
    """SHA-256 of the uncompressed lines: what a replay is compared on."""
    lines: int
    raw_bytes: int
    dead_letters: tuple[DeadLetter, ...]
    dropped: int
    """Producer duplicates dropped inside the run's range."""


@dataclass(slots=True)
class _OpenRun:
    minute: datetime
    lo_us: int
    """The run's minute's first microsecond: a record before it is late (rule 1)."""
    cut_us: int
    """The first microsecond rule 1 or rule 4 cuts at: the next minute, or
    ``flush_seconds`` after the run's first record, whichever is sooner."""
    first: Position
    opened_at: float
    last: Position
    gzip: Compressor
    compress_at: int
    """Compress the pending lines once ``raw_bytes`` reaches this (every ~chunk)."""
    chunk: int
    chunks: list[bytes] = field(default_factory=list)
    digest: Any = field(default_factory=hashlib.sha256)
    """A ``hashlib.sha256`` (its type, ``hashlib._Hash``, does not exist at run time,
    and a compiled build reads annotations at run time)."""
    consumed: int = 0
    raw_bytes: int = 0
    other_bytes: int = 0
    """What the records without a line buffer (dead letters' payloads)."""
    dead: list[DeadLetter] = field(default_factory=list)
    dropped: int = 0
    pending: list[bytes] = field(default_factory=list)

    def compress_pending(self) -> None:
        # Compressing ~64 KiB at a time costs a fraction of a call per line.
        data = b"".join(self.pending)
        self.digest.update(data)
        self.chunks.append(self.gzip.compress(data))
        self.pending.clear()
        self.compress_at = self.raw_bytes + self.chunk

    @property
    def lines(self) -> int:
        return self.consumed - len(self.dead) - self.dropped


class Batcher:
    """Cuts one shard's records into runs."""

    def __init__(
        self,
        shard_id: str,
        max_records: int,
        max_bytes: int,
        flush_seconds: float,
        gzip_level: int = GZIP_LEVEL,
        *,
        codec: CodecName = "zlib",
        chunk: int = COMPRESS_CHUNK,
    ) -> None:
        self.shard_id = shard_id
        self.gzip_level = gzip_level
        self.codec: CodecName = codec
        self.chunk = chunk
        self.max_records = max_records
        self.max_bytes = max_bytes
        # Exactly the microseconds timedelta(seconds=flush_seconds) holds.
        self.flush_us = timedelta(seconds=flush_seconds) // timedelta(microseconds=1)
        self.flush_seconds = flush_seconds
        self._run: _OpenRun | None = None
        self._minute_number = -1
        self._minute = datetime.min

    @property
    def open(self) -> bool:
        """Whether records are buffered."""
        return self._run is not None

    def add_line(self, record: Record, line: bytes, now: float) -> LandedRun | None:
        """Add a record and its line; returns the run this record closed, if any.

        The per-record path of the lander: the record joins the open run unless one of
        rules 1-4 cuts first (checked on integers: one range test for rules 1 and 4).
        """
        us = record.arrival_us
        if us < 0:
            us = record.micros()
        size = len(line)
        run = self._run
        if (
            run is None
            or not run.lo_us <= us < run.cut_us
            or run.consumed >= self.max_records
            or run.raw_bytes + run.other_bytes + size > self.max_bytes
        ):
            return self.add(record, line, now)
        run.last = record.position
        run.consumed += 1
        run.raw_bytes += size
        run.pending.append(line)
        if run.raw_bytes >= run.compress_at:
            run.compress_pending()
        return None

    def add(
        self, record: Record, line: bytes | None, now: float, size: int = 0
    ) -> LandedRun | None:
        """Add a record (``line`` None: dropped or dead-lettered by the caller).

        ``size`` is what a line-less record buffers (a dead letter's payload), so the
        byte bound caps memory whatever the records are. Returns the run this record
        closed, if it closed one.
        """
        us = record.arrival_us
        if us < 0:
            us = record.micros()
        size = len(line) if line is not None else size
        closed = None
        run = self._run
        if run is not None and (
            not run.lo_us <= us < run.cut_us
            or run.consumed >= self.max_records
            or run.raw_bytes + run.other_bytes + size > self.max_bytes
        ):
            closed = self._close()
            run = None
        if run is None:
            run = self._run = self._open(record, us, now)
        run.last = record.position
        run.consumed += 1
        if line is None:
            run.other_bytes += size
            return closed
        run.raw_bytes += size
        run.pending.append(line)
        if run.raw_bytes >= run.compress_at:
            run.compress_pending()
        return closed

    def _open(self, record: Record, us: int, now: float) -> _OpenRun:
        minute_number = us // 60_000_000
        if minute_number != self._minute_number:
            self._minute_number = minute_number
            self._minute = minute_of(record.arrival)
        lo_us = minute_number * 60_000_000
        return _OpenRun(
            self._minute,
            lo_us,
            min(lo_us + 60_000_000, us + self.flush_us),
            record.position,
            now,
            record.position,
            gzip_stream(self.gzip_level, self.codec),
            self.chunk,
            self.chunk,
        )

    def add_dead(self, dead: DeadLetter, now: float) -> LandedRun | None:
        """Add a record that goes to the dead letters."""
        closed = self.add(dead.record, None, now, size=len(dead.record.data))
        assert self._run is not None
        self._run.dead.append(dead)
        return closed

    def add_dropped(self, record: Record, now: float) -> LandedRun | None:
        """Add a record dropped as a producer duplicate (it still extends the range)."""
        closed = self.add(record, None, now)
        assert self._run is not None
        self._run.dropped += 1
        return closed

    def due(self, now: float) -> LandedRun | None:
        """Close the open run if it has waited ``flush_seconds`` (quiet shard)."""
        if self._run is not None and now - self._run.opened_at >= self.flush_seconds:
            return self._close()
        return None

    def close(self) -> LandedRun | None:
        """Close the open run, if any (shard end, shutdown)."""
        return self._close() if self._run is not None else None

    def discard(self) -> None:
        """Forget the open run (lease lost: it must not land)."""
        self._run = None

    def _close(self) -> LandedRun:
        run = self._run
        assert run is not None
        self._run = None
        run.compress_pending()
        run.chunks.append(run.gzip.flush())
        return LandedRun(
            shard_id=self.shard_id,
            minute=run.minute,
            first=run.first,
            last=run.last,
            body=b"".join(run.chunks),
            content_sha256=run.digest.hexdigest(),
            lines=run.lines,
            raw_bytes=run.raw_bytes,
            dead_letters=tuple(run.dead),
            dropped=run.dropped,
        )
