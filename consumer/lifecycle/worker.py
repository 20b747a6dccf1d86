"""The worker: one supervising coroutine over the beat, lead and shard-sync loops and a
task per owned shard.

Retriable failures in a loop (:func:`consumer.errors.is_retriable`: throttling, 5xx,
timeouts, a missing table) are logged and retried on the next pass (the lease
protocol tolerates missed passes: a lease whose renewals keep failing for the
failover time is given up locally). Anything else a loop raises (access denied, a
bug) stops the worker: the supervisor logs it, shuts the shards down gracefully and
re-raises, so the process exits non-zero and its orchestrator restarts it; failures
never vanish.

Graceful shutdown (SIGTERM/SIGINT): stop taking leases; ask every shard to finish the
batch in hand, call ``shutdown_requested`` (where the processor lands and checkpoints)
and hand its lease to the receiver the leader names (or release it, for the leader to
give); keep beating meanwhile; give up after ``shutdown_seconds`` and release what is left.

The shards' tasks are :class:`~consumer.lifecycle.shards.Shards`; a worker that cannot
land gives them back (:mod:`consumer.lifecycle.fitness`).

Before any of that the worker refuses a table where another application renews leases
(:mod:`consumer.leases.foreign`) and claims its id with its board slot
(:mod:`consumer.leases.identity`): a second live process under the same id is refused.

A worker reads one stream, or several (``LANDER_STREAMS``): one lane per stream
(:mod:`consumer.lifecycle.lanes`), each with its own client, processors and shard
syncer, over one lease table and one coordinator, so balance spreads every stream's
shards together. A multi-stream worker lists the streams every
``LANDER_STREAMS_SYNC_SECONDS`` and opens or retires lanes as streams appear and go.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import structlog

from consumer.aio import wait_event
from consumer.aws import backoff
from consumer.config import Settings
from consumer.errors import LanderError, RefusedError, is_retriable
from consumer.leases.board import LEAD_SECONDS
from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.foreign import refuse_strangers
from consumer.leases.keys import StreamId, split_key
from consumer.leases.model import Lease
from consumer.leases.store import CoordinatedStore, TableMissingError
from consumer.leases.wake import Alarm
from consumer.lifecycle.fitness import Fitness
from consumer.lifecycle.lanes import Lane, Lanes, StreamWatch
from consumer.lifecycle.processor import Probe, ProcessorFactory
from consumer.lifecycle.shards import Shards
from consumer.metrics import LanderMetrics, version
from consumer.stream import StreamClient, StreamNotFoundError
from consumer.stream.modes import unstarted
from consumer.stream.readers import ReaderFactory
from consumer.stream.shards import CREATE_BATCH, ShardSyncer

log = structlog.get_logger("consumer.lifecycle.worker")

STREAM_MISSING_PASSES = 3
"""Shard syncs in a row that find no stream before the worker stops (it was deleted)."""

SYNC_AGAIN_SECONDS = 5.0
"""After a shard sync that left missing leases to another worker, the next sync comes
this soon (jittered), not a full sync interval later."""
PREPARE_ATTEMPTS = 3
"""Start-ups tried when the lease table goes while a worker starts."""


class StreamGoneError(RefusedError):
    """The stream no longer exists: nothing is left to consume. Not retriable."""

    retriable = False


@dataclass(frozen=True, slots=True)
class Health:
    """What ``/healthz`` and ``/readyz`` answer, with details for a person."""

    alive: bool
    ready: bool
    detail: dict[str, object] = field(default_factory=dict)


class Worker:
    """Consumes a stream's shards in cooperation with the other workers of the table."""

    def __init__(
        self,
        settings: Settings,
        store: CoordinatedStore,
        stream: StreamClient | None,
        processor_factory: ProcessorFactory | None,
        *,
        rng: random.Random | None = None,
        metrics: LanderMetrics | None = None,
        probe: Probe | None = None,
        reader: ReaderFactory | None = None,
        lanes: Iterable[Lane] = (),
        watch: StreamWatch | None = None,
    ) -> None:
        """One stream (``stream`` and ``processor_factory``, read by ``reader``, by
        default polling as ``settings`` say), or several: ``lanes``, and a ``watch``
        that opens and retires lanes."""
        self.settings = settings
        self.metrics = metrics or LanderMetrics()
        self.metrics.stream = settings.stream
        self.worker_id = settings.worker_id
        if stream is not None:
            assert processor_factory is not None
            initial, timestamp = settings.start_position
            read = reader or unstarted(settings)
            one = Lane(None, settings.stream, stream, processor_factory, initial, timestamp, read)
            lanes = [one, *lanes]
        self.lanes = Lanes(lanes)
        if not len(self.lanes):
            raise ValueError("a worker needs a stream (or lanes)")
        self.watch = watch
        self.store = store
        self.alarm = Alarm()
        """Cuts the board beat's sleep short on a wake-up (:mod:`consumer.leases.wake`)."""
        self.wake_address: str | None = None
        self.board = BoardCoordinator(
            store,
            settings.worker_id,
            settings.failover_seconds,
            settings.renew_interval,
            sweep_seconds=settings.lease_sweep_seconds,
            rng=rng,
            metrics=self.metrics,
            consumes=self.lanes.consumes,
            stall_seconds=settings.stall_seconds,
        )
        self.coordinator = self.board
        """The same object as :attr:`board` (the name the shard consumers know it by)."""
        for lane in self.lanes:
            self._set_syncer(lane)
        self.metrics.leases_held.set_function(lambda: len(self.coordinator.held_keys()))
        self.metrics.ready.set_function(lambda: 1.0 if self.health().ready else 0.0)
        self.metrics.worker_info.labels(self.worker_id, version()).set(1)
        self._stopping = asyncio.Event()
        self._synced = asyncio.Event()
        self._sync_now = asyncio.Event()
        self.fitness = Fitness(probe, self.metrics, self._stopping, self._fit, self.worker_id)
        self.shards = Shards(
            settings,
            self.metrics,
            self.board,
            lanes=self.lanes,
            fitness=self.fitness,
            stopping=self._stopping,
            on_end=self._sync_now.set,
        )
        self.board.listen(
            taken=lambda lease: self.shards.start(lease.key),
            handoff=self.shards.hand_off,
            lost=self.shards.lose,
        )
        self._running = False
        self._last_contact: float | None = None
        self._log = log.bind(worker_id=self.worker_id)

    def _fit(self, fit: bool) -> None:
        """Landing failed (every shard is given back, none taken) or works again."""
        self.board.leaving = not fit  # the leader hands its leases on and gives it none
        self.board.unfit = not fit
        if not fit:
            self.shards.stop_all()

    def _set_syncer(self, lane: Lane) -> None:
        lane.syncer = ShardSyncer(
            lane.client, self.store, lane.initial, batch=CREATE_BATCH, stream_id=lane.stream_id
        )

    # -- lifecycle -----------------------------------------------------------------

    def advertise(self, address: str | None) -> None:
        """Where other workers wake this one (``host:port`` of its metrics server);
        set before :meth:`run`, written on its board slot when it joins."""
        self.wake_address = address
        self.board.advertise(address)

    def wake(self) -> None:
        """A wake-up arrived (``POST /wake``): beat now, not at the next interval."""
        accepted = self.alarm.ring()
        self.metrics.wakeups.labels("received" if accepted else "refused").inc()

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler)."""
        if not self._stopping.is_set():
            self._log.info("shutdown requested")
        self._stopping.set()

    def health(self) -> Health:
        """Liveness and readiness, for ``/healthz`` and ``/readyz``.

        Alive while the supervising loops run. Ready once the worker holds its id and
        the shards were listed, while the lease table answered within the failover time
        (a worker that cannot reach it is about to lose its leases), while it can land,
        and until a shutdown begins.
        """
        age = None if self._last_contact is None else time.monotonic() - self._last_contact
        reachable = age is not None and age < self.settings.failover_seconds
        claimed = self.board.slot is not None
        ready = self._running and claimed and self._synced.is_set() and reachable
        ready = ready and self.fitness.unfit is None and not self._stopping.is_set()
        detail: dict[str, object] = {
            "worker_id": self.worker_id,
            "running": self._running,
            "worker_id_claimed": claimed,
            "synced": self._synced.is_set(),
            "stopping": self._stopping.is_set(),
            "can_land": self.fitness.unfit is None,
            "lease_table_contact_seconds_ago": None if age is None else round(age, 3),
            "leases_held": self.coordinator.held_keys(),
        }
        if self.lanes.multi:
            detail["streams"] = sorted(lane.name for lane in self.lanes)
        if self.fitness.unfit is not None:
            detail["cannot_land"] = self.fitness.unfit
        return Health(alive=self._running, ready=ready, detail=detail)

    async def run(self) -> None:
        """Run until :meth:`request_stop`; re-raise a loop's unexpected failure."""
        self._running = True
        try:
            await self._run()
        finally:
            self._running = False

    async def _prepare(self) -> None:
        """The table, and no other application renewing leases in it. A table deleted
        while this runs (a worker starting as the table goes) is created again and the
        steps run again, a few times, instead of ending the worker with a traceback."""
        table = self.store
        name, failover = self.settings.lease_table, self.settings.failover_seconds
        for attempt in range(1, PREPARE_ATTEMPTS + 1):
            try:
                await self.store.ensure_table()
                await refuse_strangers(table, name, failover)
                await self.store.ensure_owner_index()  # an older table's index
            except TableMissingError:
                if attempt == PREPARE_ATTEMPTS:
                    raise
                self._log.warning("lease table gone during start-up; creating it again")
            else:
                return

    async def _run(self) -> None:
        await self._prepare()
        self._log.info(
            "worker started",
            streams=sorted(lane.name for lane in self.lanes),
            lease_table=self.settings.lease_table,
            failover_seconds=self.settings.failover_seconds,
            wake_address=self.wake_address,
        )
        # Kept through the shutdown: the beat proves this worker alive while its shards
        # are handed over, and a leader keeps planning until it has left.
        keepers = await self._start_board()
        takers = [asyncio.create_task(self._sync_loop())]
        if self.watch is not None:
            watch = self.watch
            takers.append(
                asyncio.create_task(
                    self._loop("streams", self._streams_pass, lambda: watch.interval)
                )
            )
        stop = asyncio.create_task(self._stopping.wait())
        done, _ = await asyncio.wait([*keepers, *takers, stop], return_when=asyncio.FIRST_COMPLETED)
        failure = next((t.exception() for t in done if t is not stop and t.exception()), None)
        if failure is not None:
            self._log.error("worker loop failed; shutting down", error=repr(failure))
        for task in (*takers, stop):
            task.cancel()
        await asyncio.gather(*takers, stop, return_exceptions=True)
        if failure is None:
            await self.shards.hand_over(self.settings.shutdown_seconds / 2)
        await self.shards.shutdown()
        with contextlib.suppress(LanderError, OSError):
            await self.board.leave()
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        await self.fitness.close()
        self._log.info("worker stopped")
        if failure is not None:
            raise failure

    async def _start_board(self) -> list[asyncio.Task[None]]:
        """Join the board; beat and lead from then on."""
        await self.board.join()
        self._last_contact = time.monotonic()
        board = self.board
        return [
            asyncio.create_task(
                self._loop("beat", self._beat_pass, board.beat_delay, self.alarm.sleep)
            ),
            asyncio.create_task(self._loop("lead", board.lead_pass, board.leader.delay)),
        ]

    async def _beat_pass(self) -> None:
        self.shards.report()
        await self.board.beat_pass()
        if self.board.slot is not None:
            self._last_contact = time.monotonic()

    # -- loops ---------------------------------------------------------------------

    async def _loop(
        self,
        name: str,
        one_pass: Callable[[], Awaitable[None]],
        delay: Callable[[], float],
        pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if name == "streams":  # the lanes were made from a listing just before the start
            await asyncio.sleep(delay())
        while True:
            try:
                await one_pass()
            except TableMissingError:  # deleted under the workers
                with contextlib.suppress(LanderError, OSError):
                    await self.board.table_gone()
            except Exception as exc:
                if not is_retriable(exc):
                    raise
                self._log.warning(f"{name} pass failed", error=repr(exc)[:500])
            await pause(delay())

    async def _sync_loop(self) -> None:
        failures = 0
        while True:
            if not self.board.is_leader():
                # Only the leader lists shards and creates leases.
                self._synced.set()
                self.coordinator.listed(None)
                await asyncio.sleep(LEAD_SECONDS)
                continue
            try:
                # The leader's view (swept, and kept by its own writes), not a Scan.
                view = self.board.leader.current_view()
                leases = await self.board.read_table(consistent=False) if view is None else view
                failed = await self._sync_lanes(leases)
                listed = self.lanes.listed()
                self.coordinator.listed(listed)
                self._last_contact = time.monotonic()
                failures = failures + 1 if failed else 0
                if listed is not None:
                    self._synced.set()
            except Exception as exc:
                if not is_retriable(exc):
                    raise
                failures += 1
                self._log.warning("shard sync failed", error=repr(exc)[:500])
            self._sync_now.clear()
            delay = self.settings.shard_sync_seconds
            if any(lane.incomplete for lane in self.lanes):
                # Another worker is creating leases: look again soon.
                delay = min(delay, SYNC_AGAIN_SECONDS * random.uniform(0.5, 1.5))
            if failures:
                delay = min(delay, backoff(failures, base=0.5, cap=10.0) + 0.1)
            await wait_event(self._sync_now, delay)

    async def _sync_lanes(self, leases: list[Lease]) -> bool:
        """Sync every lane's leases with its shards; True if any lane failed (the others
        are synced all the same: one stream's trouble holds no other back)."""
        failed = False
        for lane in self.lanes:
            assert lane.syncer is not None
            try:
                lane.listed = await lane.syncer.sync(leases)
                lane.incomplete = lane.syncer.incomplete
                lane.missing = 0
                # The leader syncs against its view. A creation refused means another
                # worker (the leader before it) wrote leases the view lacks: sweep now,
                # or they wait for the sweep interval, neither given nor read.
                if lane.syncer.changed or lane.incomplete:
                    self.board.leader.want_sweep()
            except StreamNotFoundError as exc:
                failed = True
                lane.missing += 1
                self._log.warning("stream not found", stream=lane.name, attempt=lane.missing)
                # Several streams: the watch retires a deleted one (StreamWatch).
                if not self.lanes.multi and lane.missing >= STREAM_MISSING_PASSES:
                    raise StreamGoneError(
                        f"Kinesis stream {lane.name} does not exist any more "
                        f"({lane.missing} shard listings in a row found none)"
                    ) from exc
            except Exception as exc:
                if not is_retriable(exc) or not self.lanes.multi:
                    raise
                failed = True
                self._log.warning("shard sync failed", stream=lane.name, error=repr(exc)[:500])
        return failed

    async def _streams_pass(self) -> None:
        """Open lanes for new streams; retire the lanes of streams gone or unmatched."""
        assert self.watch is not None
        opened, retired = await self.watch.plan(self.lanes)
        for stream in retired:
            await self._retire(stream)
        for lane in opened:
            self._set_syncer(lane)
            self.lanes.add(lane)
            self._log.info(
                "stream added",
                stream=lane.name,
                stream_id=lane.stream_id.serialized if lane.stream_id else None,
            )
        if opened:
            self.coordinator.listed(self.lanes.listed())
            self._sync_now.set()

    async def _retire(self, stream: StreamId) -> None:
        """Stop reading a stream: its shards finish their batch, land, checkpoint and
        release their leases (left in the table with their checkpoints)."""
        lane = self.lanes.remove(stream)
        if lane is None:
            return
        self.coordinator.listed(self.lanes.listed())
        keys = [key for key in self.coordinator.held_keys() if split_key(key)[0] == stream]
        self._log.warning(
            "stream retired", stream=lane.name, stream_id=stream.serialized, shards=keys
        )
        for key in keys:
            if not self.shards.request_stop(key):
                await self.coordinator.give_up(key, "retired")


def tune_gc() -> None:
    """Fewer, cheaper garbage collections on the record path.

    Every record makes a few short-lived objects; with the default gen-0 threshold
    (700) full collections run every few thousand records and walk every long-lived
    object, stalling the event loop for 100 ms and more. Freezing what start-up made
    takes it out of those walks, and a larger threshold makes collections rarer.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
