"""One shard's life under one lease, as an explicit state machine.

    INITIALIZING ─► PROCESSING ─┬─► SHARD_ENDED ──► DONE   (SHARD_END checkpointed)
          │                     ├─► STOPPING ─────► DONE   (graceful: shutdown_requested)
          │                     │
          └──────────┬──────────┴─► LEASE_LOST ───► DONE   (nothing more written)
                     └────────────► FAILED                 (the worker restarts the shard)

:data:`TRANSITIONS` is the diagram as data, and every change of state goes through
it: a change it does not list raises, so the states are enforced, not only drawn.
Any state before DONE may go to LEASE_LOST or FAILED.

Lease loss is decided here, in one place. It reaches the consumer two ways: a fenced
write (a checkpoint, a renewal made before using the lease) raises LeaseLostError in
this task, or a renewal elsewhere finds the lease taken and the worker cancels this
task. Either way :meth:`ShardConsumer.run` moves to LEASE_LOST, the processor hears
``lease_lost`` once and nothing else afterwards, and the outcome is LOST; the worker
only cancels and forgets.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

import structlog

from consumer.aio import stop_task
from consumer.errors import LanderError, summary
from consumer.leases.coordinator import LeaseCoordinator
from consumer.leases.model import Lease, LeaseLostError
from consumer.lifecycle.processor import (
    InitializationInput,
    ProcessRecordsInput,
    RecordProcessor,
)
from consumer.sequence import Checkpoint, Position, Sentinel
from consumer.stream import StreamClient
from consumer.stream.modes import unstarted
from consumer.stream.readers import Batch, BatchReader, ReaderFactory, ShardRead
from consumer.stream.records import Record

T = TypeVar("T")

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.shard")


class State(enum.StrEnum):
    """Where a shard consumer is in its life."""

    INITIALIZING = "initializing"
    PROCESSING = "processing"
    SHARD_ENDED = "shard_ended"
    STOPPING = "stopping"
    LEASE_LOST = "lease_lost"
    DONE = "done"
    FAILED = "failed"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.INITIALIZING: frozenset({State.PROCESSING, State.LEASE_LOST, State.FAILED}),
    State.PROCESSING: frozenset(
        {State.SHARD_ENDED, State.STOPPING, State.LEASE_LOST, State.FAILED}
    ),
    State.SHARD_ENDED: frozenset({State.DONE, State.LEASE_LOST, State.FAILED}),
    State.STOPPING: frozenset({State.DONE, State.LEASE_LOST, State.FAILED}),
    State.LEASE_LOST: frozenset({State.DONE}),
    State.DONE: frozenset(),
    State.FAILED: frozenset(),
}
"""Which state may follow which: the diagram above, enforced by ShardConsumer."""


class TransitionError(LanderError):
    """A change of state the diagram does not allow: a bug in the lifecycle."""


class Outcome(enum.StrEnum):
    """How a shard consumer finished."""

    ENDED = "ended"
    STOPPED = "stopped"
    LOST = "lost"


class LeaseCheckpointer:
    """The worker's :class:`~consumer.lifecycle.processor.Checkpointer`: checkpoints go through
    the lease coordinator, fenced by the lease counter."""

    def __init__(
        self,
        coordinator: LeaseCoordinator,
        key: str,
        last_delivered: Callable[[], Position | None],
        on_checkpoint: Callable[[Checkpoint], None] | None = None,
    ) -> None:
        self._coordinator = coordinator
        self.key = key
        self._last_delivered = last_delivered
        self._on_checkpoint = on_checkpoint

    async def checkpoint(self, position: Position | None = None) -> None:
        """Checkpoint ``position`` (default: the last record delivered)."""
        last = self._last_delivered()
        target = position if position is not None else last
        if target is None:
            return
        if last is None or target > last:
            raise ValueError(f"cannot checkpoint {target}: last delivered is {last}")
        await self._write(target)

    async def ensure_lease(self) -> None:
        """Raise LeaseLostError unless the lease is certainly ours right now."""
        await self._coordinator.ensure_valid(self.key)

    async def fenced(self, write: Callable[[Lease], Awaitable[T]]) -> T:
        """Run ``write`` fenced by the lease as held (:meth:`LeaseCoordinator.fenced`):
        what :mod:`consumer.effects` writes its records with."""
        return await self._coordinator.fenced(self.key, write)

    async def mark_shard_end(self) -> None:
        """Checkpoint SHARD_END; the worker calls this after ``shard_ended``."""
        await self._write(Sentinel.SHARD_END)

    async def _write(self, checkpoint: Checkpoint) -> None:
        await self._coordinator.checkpoint(self.key, checkpoint)
        if self._on_checkpoint is not None:
            self._on_checkpoint(checkpoint)


@dataclass(slots=True)
class ShardProgress:
    """How one held shard is doing: kept by the worker across restarts of its consumer,
    so a shard that fails and restarts over and over still shows as stuck."""

    pending: int = 0
    """Records delivered to the processor and not yet covered by a checkpoint."""
    waiting_since: float | None = None
    """Monotonic time since which records have waited without the checkpoint moving."""
    failures: int = 0
    """Processor failures since the checkpoint last moved."""
    last_error: str | None = None
    records_read: int = 0
    """Records handed to the processor since the shard was taken (for its load)."""
    bytes_read: int = 0
    stop_asked: float | None = None
    """Monotonic time the worker asked the shard to stop for a hand-off (None: not)."""
    stop_overdue: bool = False
    """Whether the shard was reported as not stopping for its hand-off."""

    def delivered(self, pending: int, now: float) -> None:
        """Records were handed to the processor; ``pending`` now wait."""
        self.pending = pending
        if pending and self.waiting_since is None:
            self.waiting_since = now

    def checkpointed(self, pending: int, now: float) -> None:
        """The checkpoint moved: the shard makes progress."""
        self.pending = pending
        self.waiting_since = now if pending else None
        self.failures = 0
        self.last_error = None

    def failed(self, error: BaseException) -> None:
        """The processor failed; the shard restarts from its checkpoint."""
        self.failures += 1
        self.last_error = summary(error)

    def age(self, now: float) -> float:
        """Seconds the checkpoint has not moved while records waited (0: none waits)."""
        return 0.0 if self.waiting_since is None else max(0.0, now - self.waiting_since)


class ShardConsumer:
    """Feeds one shard's records to one processor while the lease is ours."""

    def __init__(
        self,
        key: str,
        coordinator: LeaseCoordinator,
        stream: StreamClient,
        processor: RecordProcessor,
        *,
        timestamp: datetime | None = None,
        reader: ReaderFactory | None = None,
        metrics: LanderMetrics | None = None,
        progress: ShardProgress | None = None,
        shard_id: str | None = None,
        stream_name: str | None = None,
    ) -> None:
        self.key = key
        """The lease key (the shard id, or account:stream:epoch:shard id)."""
        self.shard_id = shard_id or key
        shard_id = self.shard_id
        self.progress = progress or ShardProgress()
        # Delivered batches (trimmed) whose records no checkpoint covers yet.
        self._unchecked: deque[list[Record]] = deque()
        self._unchecked_count = 0
        self.coordinator = coordinator
        self.stream = stream
        self.processor = processor
        self.state = State.INITIALIZING
        self.stopping = asyncio.Event()
        read = ShardRead(
            stream,
            shard_id,
            coordinator.lease(key).checkpoint,
            self.stopping,
            timestamp=timestamp,
            metrics=metrics,
            stream_name=stream_name,
        )
        self.reader: BatchReader = (reader or unstarted())(read)
        """The read mode's reader (:mod:`consumer.stream.readers`): polling unless told."""
        start = coordinator.lease(key).checkpoint
        self.delivered: Position | None = start if isinstance(start, Position) else None
        """The last position handed to the processor (the reader may be further on)."""
        self.checkpointer = LeaseCheckpointer(
            coordinator, key, lambda: self.delivered, self._checkpointed
        )
        self.records_delivered = 0
        self._log = log.bind(shard_id=key, worker_id=coordinator.worker_id)

    def request_stop(self) -> None:
        """Finish the batch in hand, then shut down gracefully."""
        self.stopping.set()

    def _enter(self, state: State) -> None:
        if state not in TRANSITIONS[self.state]:
            raise TransitionError(f"shard {self.key}: {self.state} -> {state}")
        self.state = state

    async def run(self) -> Outcome:
        """Run the shard until it ends, is stopped, or the lease is lost.

        A processor or stream failure moves to FAILED and propagates (the worker
        restarts the shard from its checkpoint with a new consumer). A cancellation
        while the lease is lost is a lease loss; any other cancellation propagates.
        """
        try:
            return await self._run()
        except LeaseLostError as exc:
            return await self._lease_lost(exc.reason)
        except asyncio.CancelledError:
            if not self.coordinator.is_lost(self.key):
                raise
            _uncancel()
            return await self._lease_lost("a renewal found the lease taken")
        except Exception:
            if self.state not in (State.DONE, State.FAILED):
                self._enter(State.FAILED)
            raise

    async def _run(self) -> Outcome:
        lease = self.coordinator.lease(self.key)
        await self.processor.initialize(
            InitializationInput(self.shard_id, self.coordinator.worker_id, lease.checkpoint)
        )
        self._enter(State.PROCESSING)
        self._log.info("shard processing", checkpoint=str(lease.checkpoint))
        # The reader runs one page ahead, so the next GetRecords is in flight while the
        # processor works and checkpoints (KCL's prefetching, one page deep).
        pages: asyncio.Queue[Batch | BaseException | None] = asyncio.Queue(maxsize=1)
        fetcher = asyncio.create_task(self._fetch(pages))
        try:
            while (batch := await pages.get()) is not None:
                if isinstance(batch, BaseException):
                    raise batch
                # Prove the lease is still ours before anyone acts on these records:
                # after a pause this renews first, and raises if another worker took over.
                await self.coordinator.ensure_valid(self.key)
                if batch.records:
                    self.delivered = batch.records[-1].position
                    self._unchecked.append(batch.records)
                    self._unchecked_count += len(batch.records)
                    self.progress.delivered(self._unchecked_count, self.coordinator.clock())
                    self.progress.records_read += len(batch.records)
                    self.progress.bytes_read += sum(len(r.data) for r in batch.records)
                self.coordinator.lagging(self.key, batch.millis_behind)
                await self.processor.process_records(
                    ProcessRecordsInput(batch.records, self.checkpointer, batch.millis_behind)
                )
                self.records_delivered += len(batch.records)
                if batch.shard_end:
                    self._enter(State.SHARD_ENDED)
                    await self.processor.shard_ended(self.checkpointer)
                    await self.checkpointer.mark_shard_end()
                    self._log.info("shard ended", records=self.records_delivered)
                    self._enter(State.DONE)
                    return Outcome.ENDED
                if self.stopping.is_set():
                    break
        finally:
            # The reader ends at its next look even if a cancellation is lost below
            # (consumer.aio), and a last page it queues is dropped: the stop never
            # hangs on a fetcher blocked on the full queue.
            self.stopping.set()
            await stop_task(fetcher, pages)
        self._enter(State.STOPPING)
        await self.coordinator.ensure_valid(self.key)
        await self.processor.shutdown_requested(self.checkpointer)
        self._enter(State.DONE)
        return Outcome.STOPPED

    def _checkpointed(self, checkpoint: Checkpoint) -> None:
        """Forget the records a checkpoint now covers; tell the progress."""
        if isinstance(checkpoint, Position):
            while self._unchecked and self._unchecked[0][-1].position <= checkpoint:
                self._unchecked_count -= len(self._unchecked.popleft())
            if self._unchecked:
                first = self._unchecked[0]
                covered = bisect.bisect_right(first, checkpoint, key=lambda r: r.position)
                if covered:
                    self._unchecked[0] = first[covered:]
                    self._unchecked_count -= covered
        else:  # SHARD_END: everything is done
            self._unchecked.clear()
            self._unchecked_count = 0
        self.progress.checkpointed(self._unchecked_count, self.coordinator.clock())

    async def _fetch(self, pages: asyncio.Queue[Batch | BaseException | None]) -> None:
        try:
            # aclosing: a cancelled fetch closes the reader at once (a fan-out reader
            # drops its subscription), not whenever the generator is collected.
            async with contextlib.aclosing(self.reader.batches()) as batches:
                async for batch in batches:
                    await pages.put(batch)
                    if batch.shard_end:
                        return
            await pages.put(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await pages.put(exc)

    async def _lease_lost(self, reason: str) -> Outcome:
        """Tell the processor the lease is gone (once); nothing is checkpointed."""
        self._log.info("shard stopped: lease lost", reason=reason)
        if State.LEASE_LOST in TRANSITIONS[self.state]:
            self._enter(State.LEASE_LOST)
            try:
                await self.processor.lease_lost()
            except Exception:
                self._log.exception("processor failed in lease_lost")
            self._enter(State.DONE)
        return Outcome.LOST


def _uncancel() -> None:
    """Take back every cancellation this task received (the worker sends one per
    notice of the loss): they have been handled."""
    task = asyncio.current_task()
    while task is not None and task.cancelling():
        task.uncancel()
