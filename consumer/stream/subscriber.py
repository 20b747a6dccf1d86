"""One shard read through enhanced fan-out: subscriptions turned into the polling
reader's batches, with KCL's recovery rules.

:class:`SubscriptionReader` has :class:`~consumer.stream.reader.ShardReader`'s face
(``batches()``, ``resume_point()``, ``last``), so the shard consumer, the checkpoints,
KPL de-aggregation and the processor contract do not change. Inside:

- A pump task reads the event stream into a queue of :data:`QUEUE_EVENTS` events; when
  the processor is slower, the pump waits and the connection's flow control holds the
  service back (backpressure), instead of events piling up in memory.
- A subscription ends after five minutes: the next one starts *after* the
  continuation sequence number of the last event handed on, at once.
- Shard end is a missing continuation *with* child shards naming this shard
  (:func:`~consumer.stream.fanout.judge`). An end without child shards (kinesis-local
  never sends them) is checked with one GetRecords: the shard ends only if the polling
  API agrees; otherwise the subscription is restarted. An invalid event never ends a
  shard.
- ``ResourceInUse`` (a live subscription elsewhere; the consumer not ACTIVE yet),
  throttling, timeouts and connection errors: back off and subscribe again.
- ``ResourceNotFound``: the shard is looked up. Gone from the stream's listing (past
  retention) is the shard's end; listed means the consumer is missing, a clear error.
- A shard whose events have been empty and caught up for :data:`END_CHECK_SECONDS` is
  asked with one GetRecords whether it has ended (then again every such interval): a
  closed shard whose subscription never ends (kinesis-local) still ends.
- A subscription that delivers nothing, not even an empty event, for
  :data:`SILENCE_SECONDS` is cancelled and started again (KCL #463: shards that
  silently stop consuming).
- Only one subscription per reader is ever open: the old one is closed (its pump
  cancelled, its connection dropped) before the next starts, so no event of a
  superseded subscription reaches the processor. Setting ``stopping`` (lease lost,
  shutdown) or closing the generator closes the subscription at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from consumer.aio import stop_task
from consumer.aws import backoff
from consumer.sequence import Checkpoint, Position
from consumer.stream import StartAt, StreamClient, StreamError, StreamNotFoundError
from consumer.stream.fanout import (
    ConsumerNotFoundError,
    FanOutClient,
    ShardEvent,
    StreamConsumer,
    Subscription,
    SubscriptionInUseError,
    Verdict,
    judge,
)
from consumer.stream.reader import Batch, nap, resume_at, start_at
from consumer.stream.records import Record, unpack

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.stream.subscriber")

QUEUE_EVENTS = 2
"""Events read ahead of the processor; beyond that, the connection waits."""
SILENCE_SECONDS = 30.0
"""A subscription that sends nothing for this long is restarted. Kinesis sends an
event at least every few seconds even when the shard is quiet."""
MIN_SUBSCRIBE_INTERVAL = 1.0
END_CHECK_SECONDS = 30.0
"""Quiet time after which a shard is asked (one GetRecords) whether it has ended."""
END_CHECK_PAGES = 3
"""GetRecords pages an end check follows (the last records, then the end)."""
IN_USE_EXPECTED = 4
"""ResourceInUse refusals in a row logged at info (a hand-off's takeover), not warning."""
"""Kinesis allows one SubscribeToShard a second per consumer and shard."""


class _Ended:
    """The service closed the event stream (the five-minute end)."""


ENDED = _Ended()
SILENT = _Ended()
"""Nothing came for the silence bound: the reader restarts the subscription."""


class SubscriptionReader:
    """Reads one shard through SubscribeToShard until it ends or ``stopping`` is set."""

    def __init__(
        self,
        stream: StreamClient,
        fanout: FanOutClient,
        consumer: StreamConsumer,
        shard_id: str,
        checkpoint: Checkpoint,
        *,
        timestamp: datetime | None = None,
        stopping: asyncio.Event | None = None,
        silence_seconds: float = SILENCE_SECONDS,
        subscribe_interval: float = MIN_SUBSCRIBE_INTERVAL,
        retry_base: float = 1.0,
        end_check_seconds: float = END_CHECK_SECONDS,
        clock: Callable[[], float] | None = None,
        metrics: LanderMetrics | None = None,
        stream_name: str | None = None,
    ) -> None:
        self.stream = stream
        self.stream_name = (
            stream_name if stream_name is not None else metrics.stream if metrics else ""
        )
        """The ``stream`` label of this shard's series."""
        self.fanout = fanout
        self.consumer = consumer
        self.shard_id = shard_id
        self.stopping = stopping or asyncio.Event()
        self.silence_seconds = silence_seconds
        self.subscribe_interval = subscribe_interval
        self.retry_base = retry_base
        self.end_check_seconds = end_check_seconds
        self._quiet_since: float | None = None
        self.clock = clock or time.monotonic
        self.metrics = metrics
        self.start = start_at(checkpoint, timestamp)
        self.last: Position | None = checkpoint if isinstance(checkpoint, Position) else None
        """Position of the last record delivered (or checkpointed before we started)."""
        self.continuation: int | None = None
        """Continuation of the last event handed on: the next subscription starts after it."""
        self.subscriptions = 0
        self.restarts: dict[str, int] = {}
        """Why subscriptions were started again, counted (for tests and the log)."""
        self._last_subscribe = -subscribe_interval
        # A worker may read shards of one id in several streams: the logs say which.
        named = {"stream": self.stream_name} if self.stream_name else {}
        self._log = log.bind(shard_id=shard_id, **named)

    def resume_point(self) -> StartAt:
        """Where a fresh subscription (or iterator) starts so that nothing is skipped."""
        return resume_at(self.last, self.start)

    async def batches(self) -> AsyncGenerator[Batch, None]:
        """Yield batches until the shard ends or the reader is asked to stop."""
        failures = 0
        while not self.stopping.is_set():
            try:
                subscription = await self._subscribe()
            except StreamNotFoundError:
                if await self._shard_gone():
                    yield Batch([], None, shard_end=True)
                    return
                raise ConsumerNotFoundError(
                    f"stream consumer {self.consumer.name!r} ({self.consumer.arn}) is not "
                    f"registered, or cannot read {self.shard_id}"
                ) from None
            except StreamError as exc:
                if not exc.retriable:
                    raise
                failures += 1
                await self._back_off(exc, failures)
                continue
            self.subscriptions += 1
            queue: asyncio.Queue[ShardEvent | _Ended | BaseException] = asyncio.Queue(
                maxsize=QUEUE_EVENTS
            )
            pump = asyncio.create_task(_pump(subscription, queue))
            failed: StreamError | None = None
            try:
                async for batch in self._consume(queue):
                    failures = 0
                    yield batch
                    if batch.shard_end:
                        return
            except StreamError as exc:
                if not exc.retriable:
                    raise
                failed = exc
            finally:  # closed before any backoff: no connection outlives its use
                # Closed first, shielded: a second cancellation while the pump stops
                # (a lost lease is cancelled once per notice) must not skip the close,
                # or the service refuses the shard's next owner for five minutes.
                await asyncio.shield(subscription.close())
                await stop_task(pump, queue)  # never hangs on a full queue
            if failed is not None:
                failures += 1
                await self._back_off(failed, failures)

    async def _consume(
        self, queue: asyncio.Queue[ShardEvent | _Ended | BaseException]
    ) -> AsyncIterator[Batch]:
        """Batches from one subscription, until it ends, goes silent or is invalid."""
        while True:
            item = await self._next(queue)
            if item is None or item is SILENT:  # stopping, or restarting a silent one
                return
            if isinstance(item, _Ended):
                self._restarted("subscription ended")
                return
            if isinstance(item, BaseException):
                raise item
            judged = judge(self.shard_id, item)
            if judged.verdict is Verdict.INVALID:
                self._log.error("invalid fan-out event; checking the shard", reason=judged.reason)
                ended = await self._ended_by_polling()
                if ended is not None:
                    yield ended
                    return
                self._restarted("invalid event")
                return
            records = self._unpack(item)
            if judged.verdict is Verdict.SHARD_END:
                self._log.info(
                    "shard ended (fan-out)", children=[c.shard_id for c in judged.children]
                )
                yield Batch(records, item.millis_behind, shard_end=True)
                return
            self.continuation = item.continuation
            yield Batch(records, item.millis_behind)
            if await self._quiet_and_closed(item):
                ended = await self._ended_by_polling()
                if ended is not None:
                    yield ended
                    return

    async def _quiet_and_closed(self, event: ShardEvent) -> bool:
        """Whether to ask GetRecords if the shard has ended: after END_CHECK_SECONDS of
        empty, caught-up events (then again every END_CHECK_SECONDS). AWS ends a closed
        shard's subscription with a last event; kinesis-local never does and keeps
        sending empty ones, which would hold the children back for ever."""
        now = self.clock()
        if event.records or event.millis_behind:
            self._quiet_since = None
            return False
        if self._quiet_since is None:
            self._quiet_since = now
            return False
        if now - self._quiet_since < self.end_check_seconds:
            return False
        self._quiet_since = now
        return True

    async def _next(
        self, queue: asyncio.Queue[ShardEvent | _Ended | BaseException]
    ) -> ShardEvent | _Ended | BaseException | None:
        """The next event; None when stopping; a silent subscription ends it."""
        get = asyncio.ensure_future(queue.get())
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {get, stop}, timeout=self.silence_seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (get, stop):
                if not waiter.done():
                    waiter.cancel()
        if stop in done or self.stopping.is_set():
            return None
        if get in done:
            return get.result()
        self._log.warning(
            "fan-out subscription silent; restarting it", seconds=self.silence_seconds
        )
        self._restarted("silent")
        return SILENT

    async def _subscribe(self) -> Subscription:
        wait = self._last_subscribe + self.subscribe_interval - self.clock()
        if wait > 0:
            await self._nap(wait)
        self._last_subscribe = self.clock()
        return await self.fanout.subscribe(
            self.consumer.arn, self.shard_id, self.resume_point(), self.continuation
        )

    def _unpack(self, event: ShardEvent) -> list[Record]:
        records = unpack(self.shard_id, event.records, self.last)
        if self.metrics is not None:
            self.metrics.behind(self.stream_name, self.shard_id, event.millis_behind)
        if records:
            self.last = records[-1].position
            if self.metrics is not None:
                self.metrics.records_read.labels(self.stream_name, self.shard_id).inc(len(records))
        return records

    async def _ended_by_polling(self) -> Batch | None:
        """Whether GetRecords from the last delivered position finds the shard closed
        and read (following its iterator a few pages: the page with the last records
        may still carry one); the shard's last batch if so, else None (nothing is
        taken: the subscription delivers what is left)."""
        records: list[Record] = []
        last = self.last
        try:
            iterator = await self.stream.get_iterator(self.shard_id, self.resume_point())
            for _ in range(END_CHECK_PAGES):
                page = await self.stream.get_records(iterator, 10_000)
                unpacked = unpack(self.shard_id, page.records, last)
                if unpacked:
                    records.extend(unpacked)
                    last = unpacked[-1].position
                if page.next_iterator is None:
                    break
                if not page.records:
                    return None  # open, and read to its end
                iterator = page.next_iterator
            else:
                return None
        except StreamError as exc:
            self._log.warning("could not check the shard's end", error=repr(exc)[:300])
            return None
        self.last = last
        self._log.info("shard ended (confirmed by GetRecords)")
        return Batch(records, 0, shard_end=True)

    async def _shard_gone(self) -> bool:
        """Whether the shard is no longer listed (trimmed past the retention period)."""
        shards = await self.stream.list_shards()
        return all(shard.shard_id != self.shard_id for shard in shards)

    async def _back_off(self, exc: StreamError, failures: int) -> None:
        delay = backoff(failures, base=self.retry_base, cap=10 * self.retry_base)
        # A shard just handed over: the previous owner's subscription counts as live
        # for up to five seconds (AWS and kinesis-local), so the first refusals are
        # expected, not worth a warning.
        expected = isinstance(exc, SubscriptionInUseError) and failures <= IN_USE_EXPECTED
        (self._log.info if expected else self._log.warning)(
            "SubscribeToShard failed; backing off",
            error=type(exc).__name__,
            detail=str(exc)[:300],
            attempt=failures,
            delay=round(delay, 3),
        )
        self._restarted(type(exc).__name__)
        await self._nap(delay)

    def _restarted(self, why: str) -> None:
        self.restarts[why] = self.restarts.get(why, 0) + 1

    async def _nap(self, seconds: float) -> None:
        await nap(self.stopping, seconds)


async def _pump(
    subscription: Subscription, queue: asyncio.Queue[ShardEvent | _Ended | BaseException]
) -> None:
    """Read the event stream into the bounded queue; its end or error goes last."""
    try:
        async for event in subscription.events():
            await queue.put(event)
        await queue.put(ENDED)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        await queue.put(exc)
