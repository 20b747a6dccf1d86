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

A worker that cannot land gives its shards back. When one shard's processor has
failed ``landing_failures`` times in a row, the worker runs its processor's probe (the
lander's: a conditional put into the archive). If the probe fails too, the fault is
the worker's, not the shard's: it stops being ready, releases every shard, takes and
asks for none, and probes again with backoff until a probe passes. If the probe
passes (or the processor has none), the shard is retried in place and reported as
stuck (checkpoint age, pending records, last error) in the metrics and the lease.

Before any of that the worker refuses a table where another application renews leases
(:mod:`consumer.leases.foreign`) and claims its id with its board slot
(:mod:`consumer.leases.identity`): a second live process under the same id is refused.

A worker reads one stream, or several (``LANDER_STREAMS``): one lane per stream
(:mod:`consumer.lifecycle.lanes`), each with its own client, processors and shard
syncer, over one lease table and one coordinator, so balance spreads every stream's
shards together. A multi-stream worker lists the streams every
``LANDER_STREAMS_SYNC_SECONDS`` and opens or retires lanes as streams appear and go.

Long module: the supervising loops, the shard tasks and the landing health share one
state (held leases, running consumers, whether the worker can land); apart, each
would need the others' internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

import structlog

from consumer.aio import wait_event
from consumer.aws import backoff
from consumer.config import Settings
from consumer.errors import LanderError, RefusedError, is_retriable, summary
from consumer.leases.board import LEAD_SECONDS
from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.foreign import refuse_strangers
from consumer.leases.keys import StreamId, split_key
from consumer.leases.model import Lease, ShardLoad, ShardReport
from consumer.leases.store import CoordinatedStore, LeaseStore, TableMissingError
from consumer.leases.wake import Alarm
from consumer.lifecycle.lanes import Lane, Lanes, StreamWatch
from consumer.lifecycle.processor import Probe, ProcessorFactory
from consumer.lifecycle.shard_consumer import Outcome, ShardConsumer, ShardProgress
from consumer.metrics import LanderMetrics, version
from consumer.stream import StreamClient, StreamNotFoundError
from consumer.stream.fanout import FanOutReading
from consumer.stream.shards import CREATE_BATCH, ShardSyncer

log = structlog.get_logger("consumer.lifecycle.worker")

STREAM_MISSING_PASSES = 3
"""Shard syncs in a row that find no stream before the worker stops (it was deleted)."""
PROBE_TIMEOUT = 30.0


LOAD_SMOOTHING = 0.3
"""Weight of the newest measure in a shard's load (an exponential moving average)."""
LOAD_WINDOW_POLLS = 5
"""A load is measured over at least this many idle-poll intervals (5 s by default): a
beat (1 s for the leader) is as long as an idle poll, so one beat's count is zero, one
or two polls' worth of records."""

SYNC_AGAIN_SECONDS = 5.0
"""After a shard sync that left missing leases to another worker, the next sync comes
this soon (jittered), not a full sync interval later."""
PREPARE_ATTEMPTS = 3
"""Start-ups tried when the lease table goes while a worker starts."""
SUPERVISOR_RESTART_SECONDS = 1.0
"""A shard's supervising task that died of a bug runs again after this pause."""


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
        store: LeaseStore,
        stream: StreamClient | None,
        processor_factory: ProcessorFactory | None,
        *,
        rng: random.Random | None = None,
        metrics: LanderMetrics | None = None,
        probe: Probe | None = None,
        fanout: FanOutReading | None = None,
        lanes: Iterable[Lane] = (),
        watch: StreamWatch | None = None,
    ) -> None:
        """One stream (``stream`` and ``processor_factory``; ``fanout`` in efo read
        mode), or several: ``lanes``, and a ``watch`` that opens and retires lanes."""
        self.settings = settings
        self.metrics = metrics or LanderMetrics()
        self.metrics.stream = settings.stream
        self.worker_id = settings.worker_id
        if stream is not None:
            assert processor_factory is not None
            initial, timestamp = settings.start_position
            one = Lane(None, settings.stream, stream, processor_factory, initial, timestamp, fanout)
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
            cast(CoordinatedStore, store),
            settings.worker_id,
            settings.failover_seconds,
            settings.renew_interval,
            sweep_seconds=settings.lease_sweep_seconds,
            rng=rng,
            metrics=self.metrics,
        )
        self.board.on_taken = lambda lease: self._start_shard(lease.key)
        self.board.on_handoff = self._hand_off
        self.board.on_lost = self._lose
        self.board.consumes = self.lanes.consumes
        self.coordinator = self.board
        """The same object as :attr:`board` (the name the shard consumers know it by)."""
        for lane in self.lanes:
            self._set_syncer(lane)
        self.probe = probe
        self.metrics.leases_held.set_function(lambda: len(self.coordinator.held))
        self.metrics.ready.set_function(lambda: 1.0 if self.health().ready else 0.0)
        self.metrics.landing_healthy.set(1)
        self.metrics.worker_info.labels(self.worker_id, version()).set(1)
        self.consumers: dict[str, ShardConsumer] = {}
        self.shard_tasks: dict[str, asyncio.Task[None]] = {}
        self.progress: dict[str, ShardProgress] = {}
        self._read_at: dict[str, tuple[float, int, int]] = {}
        self.unfit: str | None = None
        """Why this worker cannot land right now (None while it can)."""
        self._give_back = asyncio.Event()
        self._probing: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._synced = asyncio.Event()
        self._sync_now = asyncio.Event()
        self._running = False
        self._last_contact: float | None = None
        self._log = log.bind(worker_id=self.worker_id)

    def _set_syncer(self, lane: Lane) -> None:
        lane.syncer = ShardSyncer(
            lane.client, self.store, lane.initial, batch=CREATE_BATCH, stream_id=lane.stream_id
        )

    # -- lifecycle -----------------------------------------------------------------

    def advertise(self, address: str | None) -> None:
        """Where other workers wake this one (``host:port`` of its metrics server);
        set before :meth:`run`, written on its board slot when it joins."""
        self.wake_address = address
        self.board.address = address

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
        ready = ready and self.unfit is None and not self._stopping.is_set()
        detail: dict[str, object] = {
            "worker_id": self.worker_id,
            "running": self._running,
            "worker_id_claimed": claimed,
            "synced": self._synced.is_set(),
            "stopping": self._stopping.is_set(),
            "can_land": self.unfit is None,
            "lease_table_contact_seconds_ago": None if age is None else round(age, 3),
            "leases_held": sorted(self.coordinator.held),
        }
        if self.lanes.multi:
            detail["streams"] = sorted(lane.name for lane in self.lanes)
        if self.unfit is not None:
            detail["cannot_land"] = self.unfit
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
        table = cast(CoordinatedStore, self.store)
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
            await self._hand_over(self.board)
        await self._shutdown_shards()
        with contextlib.suppress(LanderError, OSError):
            await self.board.leave()
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        if self._probing is not None:
            self._probing.cancel()
            await asyncio.gather(self._probing, return_exceptions=True)
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
        self._report_progress()
        await self.board.beat_pass()
        if self.board.slot is not None:
            self._last_contact = time.monotonic()

    async def _hand_over(self, board: BoardCoordinator) -> None:
        """Flag this worker as leaving and keep reading while the leader names receivers
        and they acknowledge; each shard stops once its receiver polls for it. What is
        not handed over in half the shutdown time is released."""
        await board.start_leaving()
        deadline = time.monotonic() + self.settings.shutdown_seconds / 2
        while self.shard_tasks and board.has_receivers():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait(list(self.shard_tasks.values()), timeout=min(0.05, left))

    async def _shutdown_shards(self) -> None:
        for consumer in list(self.consumers.values()):
            consumer.request_stop()
        tasks = list(self.shard_tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.settings.shutdown_seconds)
            if pending:
                self._log.warning(
                    "shards did not stop in time; releasing without checkpoint",
                    shards=sorted(self._key_of(t) for t in pending),
                )
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        for key in list(self.coordinator.held):
            await self.coordinator.give_up(key)
        # A lease handed to this worker just before the stop, not taken yet, is not held:
        # pass it on too, or it would wait the failover time for this worker to expire.
        try:
            await self.coordinator.release_unheld()
        except LanderError as exc:
            self._log.warning("could not pass on leases handed to this worker", error=repr(exc))

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

    def _report_progress(self) -> None:
        """Each held shard's progress into the metrics and the next heartbeat, and its
        load (records and bytes a second since the last report, smoothed) into the
        next checkpoint."""
        now = self.coordinator.clock()
        for key in self.coordinator.held:
            progress = self.progress.get(key)
            if progress is None:
                continue
            self._measure_load(key, progress, now)
            self._check_stop(key, progress, now)
            age = progress.age(now)
            labels = self.metrics.shard(key)
            self.metrics.checkpoint_age.labels(*labels).set(round(age, 3))
            self.metrics.records_pending.labels(*labels).set(progress.pending)
            self.coordinator.reports[key] = ShardReport(
                pending=progress.pending,
                checkpoint_age_ms=int(age * 1000),
                failures=progress.failures,
                last_error=progress.last_error,
            )

    def _measure_load(self, key: str, progress: ShardProgress, now: float) -> None:
        """Records and KB a second over at least :data:`LOAD_WINDOW_POLLS` idle polls, smoothed;
        a new owner starts from the load its lease carries (the previous owner's), so a
        lease that just moved does not weigh as if idle (or doubly busy) in the plan."""
        then = self._read_at.get(key)
        if then is None:
            self._read_at[key] = (now, progress.records_read, progress.bytes_read)
            return
        seconds = now - then[0]
        if seconds < LOAD_WINDOW_POLLS * self.settings.poll_idle_seconds:
            return
        self._read_at[key] = (now, progress.records_read, progress.bytes_read)
        rps = (progress.records_read - then[1]) / seconds
        kbps = (progress.bytes_read - then[2]) / seconds / 1024
        held = self.coordinator.held.get(key)
        old = self.coordinator.loads.get(key) or (held.lease.load if held else None)
        if old is not None:  # smoothed over about three reports
            rps = old.records_per_second + LOAD_SMOOTHING * (rps - old.records_per_second)
            kbps = old.kb_per_second + LOAD_SMOOTHING * (kbps - old.kb_per_second)
        self.coordinator.loads[key] = ShardLoad(round(rps, 3), round(kbps, 3))

    async def _sync_loop(self) -> None:
        failures = 0
        while True:
            if not self.board.is_leader():
                # Only the leader lists shards and creates leases.
                self._synced.set()
                self.coordinator.listed_shards = None
                await asyncio.sleep(LEAD_SECONDS)
                continue
            try:
                # The leader's view (swept, and kept by its own writes), not a Scan.
                view = self.board.leader.current_view()
                leases = await self.board.read_table(consistent=False) if view is None else view
                failed = await self._sync_lanes(leases)
                self.coordinator.listed_shards = self.lanes.listed()
                self._last_contact = time.monotonic()
                failures = failures + 1 if failed else 0
                if self.coordinator.listed_shards is not None:
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
            self.coordinator.listed_shards = self.lanes.listed()
            self._sync_now.set()

    async def _retire(self, stream: StreamId) -> None:
        """Stop reading a stream: its shards finish their batch, land, checkpoint and
        release their leases (left in the table with their checkpoints)."""
        lane = self.lanes.remove(stream)
        if lane is None:
            return
        self.coordinator.listed_shards = self.lanes.listed()
        keys = [key for key in self.coordinator.held if split_key(key)[0] == stream]
        self._log.warning(
            "stream retired", stream=lane.name, stream_id=stream.serialized, shards=keys
        )
        for key in keys:
            consumer = self.consumers.get(key)
            if consumer is not None:
                consumer.request_stop()
            elif key not in self.shard_tasks:
                await self.coordinator.give_up(key, "retired")

    # -- shards ----------------------------------------------------------------------

    def _start_shard(self, key: str) -> None:
        if key in self.shard_tasks or self._stopping.is_set():
            return
        task = asyncio.create_task(self._own_shard(key), name=f"shard:{key}")
        self.shard_tasks[key] = task
        task.add_done_callback(self._shard_done)

    def _shard_done(self, task: asyncio.Task[None]) -> None:
        key = self._key_of(task)
        if self.shard_tasks.get(key) is task:
            del self.shard_tasks[key]
            self.progress.pop(key, None)
            self._read_at.pop(key, None)
        failed = not task.cancelled() and task.exception() is not None
        if failed:
            self._log.error("shard supervisor failed", shard_id=key, error=repr(task.exception()))
        if self.coordinator.is_lost(key):
            self.coordinator.forget(key)
        elif failed and not self._stopping.is_set():
            # Never a lease held but not read: the lease is still this worker's (its
            # slot beats), so the shard runs again from its checkpoint after a pause.
            # (Forgotten, it would wait for the leader's sweep to be given back.)
            asyncio.get_running_loop().call_later(
                SUPERVISOR_RESTART_SECONDS, self._start_shard, key
            )

    @staticmethod
    def _key_of(task: asyncio.Task[None]) -> str:
        return task.get_name().removeprefix("shard:")

    def _lose(self, key: str) -> None:
        """The lease is gone: stop the shard now, mid-batch if need be (its consumer
        turns the cancellation into a lease loss)."""
        task = self.shard_tasks.get(key)
        if task is not None:
            task.cancel()
        else:
            self.coordinator.forget(key)

    def _hand_off(self, key: str) -> None:
        consumer = self.consumers.get(key)
        if consumer is not None:
            self._log.info("handing lease off", shard_id=key)
            consumer.request_stop()
        progress = self.progress.get(key)
        if progress is not None and progress.stop_asked is None:
            progress.stop_asked = self.coordinator.clock()

    def _check_stop(self, key: str, progress: ShardProgress, now: float) -> None:
        """A shard asked to stop for a hand-off stops after its batch in hand; one that
        has not after the failover time is reported once, loudly: its receiver waits,
        and the shard is not read meanwhile."""
        asked = progress.stop_asked
        if asked is None or progress.stop_overdue:
            return
        if now - asked > self.settings.failover_seconds:
            progress.stop_overdue = True
            consumer = self.consumers.get(key)
            self._log.error(
                "shard did not stop for its hand-off",
                shard_id=key,
                seconds=round(now - asked, 1),
                state=None if consumer is None else consumer.state.value,
            )

    async def _own_shard(self, key: str) -> None:
        """Run the shard's consumer; restart it from the checkpoint if the processor fails."""
        # Every log line of this task, the reader's included, names the shard and worker.
        structlog.contextvars.bind_contextvars(shard_id=key, worker_id=self.worker_id)
        progress = self.progress.setdefault(key, ShardProgress())
        while True:
            held = self.coordinator.held.get(key)
            if held is None or held.lost:
                return
            if held.lease.finished:  # handed over (or left) at SHARD_END: nothing to read
                outcome = Outcome.ENDED
                break
            found = self.lanes.of_key(key)
            if found is None:  # its stream was retired (or is not read here)
                outcome = Outcome.STOPPED
                break
            lane, shard_id = found
            consumer: ShardConsumer | None = None
            try:
                # Inside the try: a processor whose constructor fails, or a checkpoint
                # this worker cannot start from, is retried and logged like a failing
                # batch, never left as a lease that is renewed but not read.
                consumer = ShardConsumer(
                    key,
                    self.coordinator,
                    lane.client,
                    lane.factory(),
                    shard_id=shard_id,
                    stream_name=lane.name,
                    timestamp=lane.timestamp,
                    limit=self.settings.max_records_per_call,
                    idle_seconds=self.settings.poll_idle_seconds,
                    metrics=self.metrics,
                    progress=progress,
                    fanout=lane.fanout,
                    # A quiet fan-out shard is asked whether it ended as often as the
                    # shards are listed (kinesis-local never ends a closed shard's
                    # subscription; AWS does).
                    end_check_seconds=self.settings.shard_sync_seconds,
                )
                if self._stopping.is_set() or held.handoff_to or self.unfit is not None:
                    consumer.request_stop()
                self.consumers[key] = consumer
                outcome = await consumer.run()
            except Exception as exc:
                progress.failed(exc)
                self.metrics.shard_restarts.labels(*self.metrics.shard(key)).inc()
                delay = backoff(progress.failures, base=1.0, cap=30.0) + 0.5
                self._log.error(
                    "shard failed; restarting it from its checkpoint",
                    shard_id=key,
                    error=repr(exc)[:1000],
                    attempt=progress.failures,
                    delay=round(delay, 2),
                    # The traceback once per run of failures, not on every retry.
                    exc_info=exc if progress.failures == 1 else None,
                )
                if progress.failures >= self.settings.landing_failures:
                    await self._check_fitness(key)
                if self.unfit is None and not self._stopping.is_set():
                    await _wait_any((self._stopping, self._give_back), delay)
                lost = self.coordinator.is_lost(key)
                retired = self.lanes.of_key(key) is None
                if self.unfit is None and not self._stopping.is_set() and not lost and not retired:
                    continue
                outcome = Outcome.STOPPED
            finally:
                if consumer is not None and self.consumers.get(key) is consumer:
                    del self.consumers[key]
            break
        if outcome is Outcome.LOST or self.coordinator.is_lost(key):
            self.coordinator.forget(key)
            return
        why = "shutdown" if self.unfit is None else "unfit"
        if self.lanes.of_key(key) is None:
            why = "retired"
        await self.coordinator.give_up(key, "shard_end" if outcome is Outcome.ENDED else why)
        if outcome is Outcome.ENDED:
            self._sync_now.set()

    # -- landing health ------------------------------------------------------------------

    async def _check_fitness(self, key: str) -> None:
        """A shard keeps failing: is it the shard, or can this worker not land at all?"""
        if self.probe is None or self.unfit is not None:
            return
        reason = await self._probe_failure()
        if reason is not None:
            self._become_unfit(reason)
        else:
            self._log.warning(
                "shard keeps failing but the probe passes: retrying it here", shard_id=key
            )

    async def _probe_failure(self) -> str | None:
        """Why the probe fails, or None when it passes."""
        assert self.probe is not None
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self.probe()
        except Exception as exc:
            return summary(exc)
        return None

    def _become_unfit(self, reason: str) -> None:
        self.unfit = reason
        self.metrics.landing_healthy.set(0)
        self._log.error(
            "this worker cannot land: giving every shard back and taking none until a probe passes",
            reason=reason,
            shards=sorted(self.coordinator.held),
        )
        self._give_back.set()
        self.board.leaving = True  # the leader hands its leases on and gives it none
        for consumer in list(self.consumers.values()):
            consumer.request_stop()
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(self._probe_until_fit(), name="probe")

    async def _probe_until_fit(self) -> None:
        attempt = 0
        while self.unfit is not None and not self._stopping.is_set():
            attempt += 1
            await _wait_any((self._stopping,), backoff(attempt, base=1.0, cap=30.0) + 1.0)
            if self._stopping.is_set():
                return
            reason = await self._probe_failure()
            if reason is not None:
                self.unfit = reason
                self._log.warning("probe failed; still not taking shards", reason=reason)
                continue
            self.unfit = None
            self.board.leaving = False
            self._give_back.clear()
            self.metrics.landing_healthy.set(1)
            self._log.info("probe passed: this worker can land again and takes shards")


async def _wait_any(events: tuple[asyncio.Event, ...], seconds: float) -> None:
    """Sleep ``seconds``, or less if any of ``events`` is (or becomes) set."""
    if any(event.is_set() for event in events):
        return
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


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
