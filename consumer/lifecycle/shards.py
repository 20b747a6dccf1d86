"""A worker's shards: one supervising task per held lease, and whether it can land.

Each lease this worker takes runs a :class:`~consumer.lifecycle.shard_consumer.ShardConsumer`
on a task of its own (:class:`Shards`). A processor that raises is restarted from the
checkpoint after a backoff; a lease lost stops its task at once (mid-batch if need
be); a hand-off asked stops it after the batch in hand; a shard that ends, a stream
retired or a shutdown gives the lease up.

A shard whose processor keeps failing has the worker check that it can land at all
(:mod:`consumer.lifecycle.fitness`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from consumer.aws import backoff
from consumer.config import Settings
from consumer.errors import LanderError
from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.model import ShardLoad, ShardReport
from consumer.lifecycle.fitness import Fitness, wait_any
from consumer.lifecycle.lanes import Lanes
from consumer.lifecycle.shard_consumer import Outcome, ShardConsumer, ShardProgress
from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.lifecycle.worker")

LOAD_SMOOTHING = 0.3
"""Weight of the newest measure in a shard's load (an exponential moving average)."""
LOAD_WINDOW_POLLS = 5
"""A load is measured over at least this many idle-poll intervals (5 s by default): a
beat (1 s for the leader) is as long as an idle poll, so one beat's count is zero, one
or two polls' worth of records."""
SUPERVISOR_RESTART_SECONDS = 1.0
"""A shard's supervising task that died of a bug runs again after this pause."""


class Shards:
    """The supervising task of every shard this worker holds, with each one's consumer,
    progress and load."""

    def __init__(
        self,
        settings: Settings,
        metrics: LanderMetrics,
        coordinator: BoardCoordinator,
        *,
        lanes: Lanes,
        fitness: Fitness,
        stopping: asyncio.Event,
        on_end: Callable[[], None],
    ) -> None:
        """``on_end`` is called when a shard was read to its end (its children may be
        listed now)."""
        self.settings = settings
        self.metrics = metrics
        self.coordinator = coordinator
        self.lanes = lanes
        self.fitness = fitness
        self.consumers: dict[str, ShardConsumer] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.progress: dict[str, ShardProgress] = {}
        self._read_at: dict[str, tuple[float, int, int]] = {}
        self._stopping = stopping
        self._on_end = on_end
        self._log = log.bind(worker_id=coordinator.worker_id)

    def start(self, key: str) -> None:
        """Run a shard just taken (unless it runs, or the worker stops)."""
        if key in self.tasks or self._stopping.is_set():
            return
        task = asyncio.create_task(self.own(key), name=f"shard:{key}")
        self.tasks[key] = task
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        key = _key_of(task)
        if self.tasks.get(key) is task:
            del self.tasks[key]
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
            asyncio.get_running_loop().call_later(SUPERVISOR_RESTART_SECONDS, self.start, key)

    def lose(self, key: str) -> None:
        """The lease is gone: stop the shard now, mid-batch if need be (its consumer
        turns the cancellation into a lease loss)."""
        task = self.tasks.get(key)
        if task is not None:
            task.cancel()
        else:
            self.coordinator.forget(key)

    def hand_off(self, key: str) -> None:
        """A receiver acknowledged: stop the shard after the batch in hand."""
        consumer = self.consumers.get(key)
        if consumer is not None:
            self._log.info("handing lease off", shard_id=key)
            consumer.request_stop()
        progress = self.progress.get(key)
        if progress is not None and progress.stop_asked is None:
            progress.stop_asked = self.coordinator.clock()

    def request_stop(self, key: str) -> bool:
        """Stop the shard after its batch in hand (its stream is retired); False if
        nothing runs it (the caller gives the lease up itself)."""
        consumer = self.consumers.get(key)
        if consumer is not None:
            consumer.request_stop()
        return consumer is not None or key in self.tasks

    def stop_all(self) -> None:
        """Ask every running shard to stop after its batch in hand."""
        for consumer in list(self.consumers.values()):
            consumer.request_stop()

    def report(self) -> None:
        """Each held shard's progress into the metrics and the next heartbeat, and its
        load (records and bytes a second since the last report, smoothed) into the
        next checkpoint."""
        now = self.coordinator.clock()
        for key in self.coordinator.held_keys():
            progress = self.progress.get(key)
            if progress is None:
                continue
            self.measure_load(key, progress, now)
            self._check_stop(key, progress, now)
            age = progress.age(now)
            labels = self.metrics.shard(key)
            self.metrics.checkpoint_age.labels(*labels).set(round(age, 3))
            self.metrics.records_pending.labels(*labels).set(progress.pending)
            report = ShardReport(
                pending=progress.pending,
                checkpoint_age_ms=int(age * 1000),
                failures=progress.failures,
                last_error=progress.last_error,
            )
            self.coordinator.report(key, report)

    def measure_load(self, key: str, progress: ShardProgress, now: float) -> None:
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
        old = self.coordinator.load(key)
        if old is not None:  # smoothed over about three reports
            rps = old.records_per_second + LOAD_SMOOTHING * (rps - old.records_per_second)
            kbps = old.kb_per_second + LOAD_SMOOTHING * (kbps - old.kb_per_second)
        self.coordinator.measured(key, ShardLoad(round(rps, 3), round(kbps, 3)))

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

    def _consumer(self, key: str) -> ShardConsumer | None:
        """A consumer for a held shard of a lane this worker reads, or None."""
        found = self.lanes.of_key(key)
        if found is None:  # its stream was retired (or is not read here)
            return None
        lane, shard_id = found
        return ShardConsumer(
            key,
            self.coordinator,
            lane.client,
            lane.factory(),
            shard_id=shard_id,
            stream_name=lane.name,
            timestamp=lane.timestamp,
            reader=lane.reader,
            metrics=self.metrics,
            progress=self.progress.setdefault(key, ShardProgress()),
        )

    async def own(self, key: str) -> None:
        """Run the shard's consumer; restart it from the checkpoint if the processor fails."""
        # Every log line of this task, the reader's included, names the shard and worker.
        structlog.contextvars.bind_contextvars(shard_id=key, worker_id=self.coordinator.worker_id)
        progress = self.progress.setdefault(key, ShardProgress())
        while True:
            lease = self.coordinator.holding(key)
            if lease is None:
                return
            if lease.finished:  # handed over (or left) at SHARD_END: nothing to read
                outcome = Outcome.ENDED
                break
            consumer: ShardConsumer | None = None
            try:
                # Inside the try: a processor whose constructor fails, or a checkpoint
                # this worker cannot start from, is retried and logged like a failing
                # batch, never left as a lease that is held but not read.
                consumer = self._consumer(key)
                if consumer is None:
                    outcome = Outcome.STOPPED
                    break
                if (
                    self._stopping.is_set()
                    or self.coordinator.handing_off(key)
                    or self.fitness.unfit is not None
                ):
                    consumer.request_stop()
                self.consumers[key] = consumer
                outcome = await consumer.run()
            except Exception as exc:
                if await self._failed(key, progress, exc):
                    continue
                outcome = Outcome.STOPPED
            finally:
                if consumer is not None and self.consumers.get(key) is consumer:
                    del self.consumers[key]
            break
        await self._finish(key, outcome)

    async def _failed(self, key: str, progress: ShardProgress, exc: Exception) -> bool:
        """Log a failed run, check the worker's fitness, wait the backoff: True to run
        the shard again."""
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
            await self.fitness.check(key, self.coordinator.held_keys())
        fit = self.fitness.unfit is None
        if fit and not self._stopping.is_set():
            await wait_any((self._stopping, self.fitness.give_back), delay)
        fit = self.fitness.unfit is None
        lost = self.coordinator.is_lost(key)
        retired = self.lanes.of_key(key) is None
        return fit and not self._stopping.is_set() and not lost and not retired

    async def _finish(self, key: str, outcome: Outcome) -> None:
        """Forget a lost lease; give any other up, saying why."""
        if outcome is Outcome.LOST or self.coordinator.is_lost(key):
            self.coordinator.forget(key)
            return
        why = "shutdown" if self.fitness.unfit is None else "unfit"
        if self.lanes.of_key(key) is None:
            why = "retired"
        await self.coordinator.give_up(key, "shard_end" if outcome is Outcome.ENDED else why)
        if outcome is Outcome.ENDED:
            self._on_end()

    async def hand_over(self, seconds: float) -> None:
        """Flag this worker as leaving and keep reading while the leader names receivers
        and they acknowledge; each shard stops once its receiver polls for it. What is
        not handed over in ``seconds`` is left to :meth:`shutdown`."""
        await self.coordinator.start_leaving()
        deadline = time.monotonic() + seconds
        while self.tasks and self.coordinator.has_receivers():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait(list(self.tasks.values()), timeout=min(0.05, left))

    async def shutdown(self) -> None:
        """Stop every shard (a batch in hand is finished, for ``shutdown_seconds`` at
        most) and give every lease up."""
        self.stop_all()
        tasks = list(self.tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.settings.shutdown_seconds)
            if pending:
                self._log.warning(
                    "shards did not stop in time; releasing without checkpoint",
                    shards=sorted(_key_of(t) for t in pending),
                )
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        for key in self.coordinator.held_keys():
            await self.coordinator.give_up(key)
        # A lease handed to this worker just before the stop, not taken yet, is not held:
        # pass it on too, or it would wait the failover time for this worker to expire.
        try:
            await self.coordinator.release_unheld()
        except LanderError as exc:
            self._log.warning("could not pass on leases handed to this worker", error=repr(exc))


def _key_of(task: asyncio.Task[None]) -> str:
    return task.get_name().removeprefix("shard:")
