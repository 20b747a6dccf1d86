"""One shard's GetRecords loop: iterators, pacing, backoff, expiry, shard end.

The reader resumes *at* the checkpointed sequence number (AT_SEQUENCE_NUMBER) and
drops every user record at or before the checkpointed position. That is the one rule
that is right for both plain records (subsequence 0) and KPL aggregates whose first
few user records were already processed; KCL's AFTER_SEQUENCE_NUMBER shortcut cannot
tell "subsequence 0 of an aggregate" from "a plain record".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from consumer.aio import wait_event
from consumer.aws import backoff
from consumer.sequence import Checkpoint, Position, Sentinel
from consumer.stream import (
    IteratorExpiredError,
    KinesisRecord,
    RecordsPage,
    StartAt,
    StreamClient,
    StreamError,
    ThrottledError,
)
from consumer.stream.records import Record, unpack

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.stream.reader")

MIN_CALL_INTERVAL = 0.2
"""Kinesis allows five GetRecords calls per second per shard."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one GetRecords call yielded, after deaggregation and filtering."""

    records: list[Record]
    millis_behind: int | None
    shard_end: bool = False


class ShardReader:
    """Reads one shard from a checkpoint until it ends or ``stopping`` is set."""

    def __init__(
        self,
        stream: StreamClient,
        shard_id: str,
        checkpoint: Checkpoint,
        *,
        timestamp: datetime | None = None,
        limit: int = 10_000,
        idle_seconds: float = 1.0,
        stopping: asyncio.Event | None = None,
        clock: Callable[[], float] | None = None,
        metrics: LanderMetrics | None = None,
        stream_name: str | None = None,
    ) -> None:
        self.stream = stream
        self.stream_name = (
            stream_name if stream_name is not None else metrics.stream if metrics else ""
        )
        """The ``stream`` label of this shard's series."""
        self.metrics = metrics
        self.shard_id = shard_id
        self.limit = limit
        self.idle_seconds = idle_seconds
        self.stopping = stopping or asyncio.Event()
        # Looked up now, not at import: a simulation's clock (bench/virtual_time.py) holds.
        self.clock = clock or time.monotonic
        self.start = start_at(checkpoint, timestamp)
        self.last: Position | None = checkpoint if isinstance(checkpoint, Position) else None
        """Position of the last record delivered (or checkpointed before we started)."""
        self._last_call = -MIN_CALL_INTERVAL
        # A worker may read shards of one id in several streams: the logs say which.
        named = {"stream": self.stream_name} if self.stream_name else {}
        self._log = log.bind(shard_id=shard_id, **named)

    def resume_point(self) -> StartAt:
        """Where a fresh iterator must start so that nothing is skipped."""
        return resume_at(self.last, self.start)

    async def batches(self) -> AsyncGenerator[Batch, None]:
        """Yield batches until the shard ends or the reader is asked to stop."""
        iterator: str | None = None
        failures = 0
        while not self.stopping.is_set():
            try:
                if iterator is None:
                    iterator = await self.stream.get_iterator(self.shard_id, self.resume_point())
                await self._pace()
                page = await self._get_records(iterator)
            except IteratorExpiredError:
                self._log.info("shard iterator expired; reopening", position=str(self.last))
                iterator = None
                continue
            except StreamError as exc:
                if not exc.retriable:
                    raise
                failures += 1
                delay = backoff(failures, base=0.2, cap=10.0)
                self._log.warning(
                    "GetRecords failed; backing off",
                    error=type(exc).__name__,
                    detail=str(exc)[:300],
                    attempt=failures,
                    delay=round(delay, 3),
                )
                await self._nap(delay)
                continue
            failures = 0
            records = self._unpack(page.records)
            iterator = page.next_iterator
            yield Batch(records, page.millis_behind, shard_end=iterator is None)
            if iterator is None:
                return
            if not page.millis_behind and len(page.records) < self.limit:
                # Caught up: wait before the next call even if this one returned
                # records, as KCL does. A busy shard read 5 times a second would use the
                # whole per-shard read limit and throttle every other reader of the
                # stream; behind, the reader goes as fast as the limit allows. A full
                # page counts as behind whatever MillisBehindLatest says (emulators such
                # as kinesalite always answer 0).
                await self._nap(self.idle_seconds)

    async def _get_records(self, iterator: str) -> RecordsPage:
        if self.metrics is None:
            return await self.stream.get_records(iterator, self.limit)
        started = time.perf_counter()
        try:
            page = await self.stream.get_records(iterator, self.limit)
        except ThrottledError:
            self.metrics.getrecords_throttles.labels(self.stream_name, self.shard_id).inc()
            raise
        except IteratorExpiredError:
            raise
        except StreamError as exc:
            self.metrics.getrecords_errors.labels(
                self.stream_name, self.shard_id, type(exc).__name__
            ).inc()
            raise
        finally:
            self.metrics.getrecords_seconds.labels(self.stream_name, self.shard_id).observe(
                time.perf_counter() - started
            )
        self.metrics.behind(self.stream_name, self.shard_id, page.millis_behind)
        return page

    def _unpack(self, raw: list[KinesisRecord]) -> list[Record]:
        records = unpack(self.shard_id, raw, self.last)
        if records:
            self.last = records[-1].position
            if self.metrics is not None:
                self.metrics.records_read.labels(self.stream_name, self.shard_id).inc(len(records))
        return records

    async def _pace(self) -> None:
        wait = self._last_call + MIN_CALL_INTERVAL - self.clock()
        if wait > 0:
            await asyncio.sleep(wait)
        self._last_call = self.clock()

    async def _nap(self, seconds: float) -> None:
        await nap(self.stopping, seconds)


def resume_at(last: Position | None, start: StartAt) -> StartAt:
    """Where a fresh iterator or subscription starts so that nothing is skipped: at the
    last delivered position (its user records are dropped again), else at ``start``."""
    return StartAt(kind=None, position=last) if last is not None else start


async def nap(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep, but wake at once when ``stopping`` is set (a cancellation that comes with
    the stop is kept: :func:`consumer.aio.wait_event`)."""
    await wait_event(stopping, seconds)


def start_at(checkpoint: Checkpoint, timestamp: datetime | None) -> StartAt:
    """Where a reader starts from a checkpoint (and the initial timestamp)."""
    if isinstance(checkpoint, Position):
        return StartAt(kind=None, position=checkpoint)
    if checkpoint is Sentinel.AT_TIMESTAMP:
        if timestamp is None:
            raise ValueError("AT_TIMESTAMP checkpoint needs the initial timestamp")
        return StartAt(kind=Sentinel.AT_TIMESTAMP, timestamp=timestamp)
    if checkpoint is Sentinel.SHARD_END:
        raise ValueError("shard already read to its end")
    return StartAt(kind=checkpoint)
