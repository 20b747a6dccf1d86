"""The worker: one supervising coroutine over the lease, renew and shard-sync loops
and a task per owned shard.

Transient AWS failures in a loop are logged and retried on the next pass (the lease
protocol tolerates missed passes: a lease whose renewals keep failing for the
failover time is given up locally). Anything else a loop raises is a bug: the
supervisor logs it, shuts the shards down gracefully and re-raises, so the process
exits non-zero and its orchestrator restarts it; failures never vanish.

Graceful shutdown (SIGTERM/SIGINT): stop taking leases; ask every shard to finish the
batch in hand, call ``shutdown_requested`` (where the processor lands and checkpoints)
and release its lease, so another worker takes it over on its next scan; keep
heartbeating meanwhile; give up after ``shutdown_seconds`` and release what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import backoff
from consumer.config import Settings
from consumer.leases.coordinator import LeaseCoordinator
from consumer.leases.store import LeaseStore, TableMissingError
from consumer.metrics import LanderMetrics, version
from consumer.processor import ProcessorFactory
from consumer.shard_consumer import Outcome, ShardConsumer
from consumer.shards import ShardSyncer
from consumer.stream import StreamClient, StreamError

log = structlog.get_logger("consumer.worker")

TRANSIENT: tuple[type[BaseException], ...] = (
    ClientError,
    BotoCoreError,
    StreamError,
    TableMissingError,
    OSError,
    TimeoutError,
)


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
        stream: StreamClient,
        processor_factory: ProcessorFactory,
        *,
        rng: random.Random | None = None,
        metrics: LanderMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or LanderMetrics()
        self.worker_id = settings.worker_id
        self.stream = stream
        self.store = store
        self.processor_factory = processor_factory
        self.coordinator = LeaseCoordinator(
            store,
            settings.worker_id,
            settings.failover_seconds,
            settings.renew_interval,
            rng=rng,
            metrics=self.metrics,
        )
        self.metrics.leases_held.set_function(lambda: len(self.coordinator.held))
        self.metrics.worker_info.labels(self.worker_id, version()).set(1)
        initial, self._timestamp = settings.start_position
        self.syncer = ShardSyncer(stream, store, initial)
        self.consumers: dict[str, ShardConsumer] = {}
        self.shard_tasks: dict[str, asyncio.Task[None]] = {}
        self._lost: set[str] = set()
        self._stopping = asyncio.Event()
        self._synced = asyncio.Event()
        self._sync_now = asyncio.Event()
        self._running = False
        self._last_contact: float | None = None
        self._log = log.bind(worker_id=self.worker_id)

    # -- lifecycle -----------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler)."""
        if not self._stopping.is_set():
            self._log.info("shutdown requested")
        self._stopping.set()

    def health(self) -> Health:
        """Liveness and readiness, for ``/healthz`` and ``/readyz``.

        Alive while the supervising loops run. Ready once the shards were listed, while
        the lease table answered within the failover time (a worker that cannot reach
        it is about to lose its leases) and until a shutdown begins.
        """
        age = None if self._last_contact is None else time.monotonic() - self._last_contact
        reachable = age is not None and age < self.settings.failover_seconds
        ready = self._running and self._synced.is_set() and reachable
        ready = ready and not self._stopping.is_set()
        detail: dict[str, object] = {
            "worker_id": self.worker_id,
            "running": self._running,
            "synced": self._synced.is_set(),
            "stopping": self._stopping.is_set(),
            "lease_table_contact_seconds_ago": None if age is None else round(age, 3),
            "leases_held": sorted(self.coordinator.held),
        }
        return Health(alive=self._running, ready=ready, detail=detail)

    async def run(self) -> None:
        """Run until :meth:`request_stop`; re-raise a loop's unexpected failure."""
        self._running = True
        try:
            await self._run()
        finally:
            self._running = False

    async def _run(self) -> None:
        await self.store.ensure_table()
        self._log.info(
            "worker started",
            stream=self.settings.stream,
            lease_table=self.settings.lease_table,
            failover_seconds=self.settings.failover_seconds,
        )
        renewer = asyncio.create_task(self._loop("renew", self._renew_pass, self._renew_delay))
        takers = [
            asyncio.create_task(self._sync_loop()),
            asyncio.create_task(self._loop("lease", self._lease_pass, self._scan_delay)),
        ]
        stop = asyncio.create_task(self._stopping.wait())
        done, _ = await asyncio.wait([renewer, *takers, stop], return_when=asyncio.FIRST_COMPLETED)
        failure = next((t.exception() for t in done if t is not stop and t.exception()), None)
        if failure is not None:
            self._log.error("worker loop failed; shutting down", error=repr(failure))
        for task in (*takers, stop):
            task.cancel()
        await asyncio.gather(*takers, stop, return_exceptions=True)
        await self._shutdown_shards()
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        self._log.info("worker stopped")
        if failure is not None:
            raise failure

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

    # -- loops ---------------------------------------------------------------------

    async def _loop(
        self, name: str, one_pass: Callable[[], Awaitable[None]], delay: Callable[[], float]
    ) -> None:
        if name == "lease":
            await self._synced.wait()
            # De-synchronise workers started together (see plan_acquisitions).
            await asyncio.sleep(random.uniform(0, min(0.25, self.settings.scan_interval)))
        while True:
            try:
                await one_pass()
                if name == "lease":  # a Scan: proof the table answers, leases held or not
                    self._last_contact = time.monotonic()
            except TRANSIENT as exc:
                self._log.warning(f"{name} pass failed", error=repr(exc)[:500])
            await asyncio.sleep(delay())

    def _scan_delay(self) -> float:
        # Jitter keeps workers started together from scanning in lockstep.
        delay = self.settings.scan_interval * random.uniform(0.8, 1.2)
        expiry = self.coordinator.next_expiry()
        if expiry is not None:
            # A lease whose owner stopped renewing expires before the next scan: scan
            # right then, so takeover is failover + a few ms, not + a scan interval.
            delay = min(delay, max(0.01, expiry - self.coordinator.clock() + 0.01))
        return delay

    def _renew_delay(self) -> float:
        return self.settings.renew_interval

    async def _lease_pass(self) -> None:
        result = await self.coordinator.lease_pass()
        for lease in result.taken:
            self._start_shard(lease.key)
        for key in result.handoffs:
            self._hand_off(key)

    async def _renew_pass(self) -> None:
        lost, handoffs = await self.coordinator.renew_all()
        for key in lost:
            self._lose(key)
        for key in handoffs:
            self._hand_off(key)

    async def _sync_loop(self) -> None:
        failures = 0
        while True:
            try:
                leases = await self.coordinator.read_table()
                self.coordinator.listed_shards = await self.syncer.sync(leases)
                self._last_contact = time.monotonic()
                failures = 0
                self._synced.set()
            except TRANSIENT as exc:
                failures += 1
                self._log.warning("shard sync failed", error=repr(exc)[:500])
            self._sync_now.clear()
            delay = self.settings.shard_sync_seconds
            if failures:
                delay = min(delay, backoff(failures, base=0.5, cap=10.0) + 0.1)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sync_now.wait(), timeout=delay)

    # -- shards ----------------------------------------------------------------------

    def _start_shard(self, key: str) -> None:
        if key in self.shard_tasks or self._stopping.is_set():
            return
        self._lost.discard(key)
        task = asyncio.create_task(self._own_shard(key), name=f"shard:{key}")
        self.shard_tasks[key] = task
        task.add_done_callback(self._shard_done)

    def _shard_done(self, task: asyncio.Task[None]) -> None:
        key = self._key_of(task)
        if self.shard_tasks.get(key) is task:
            del self.shard_tasks[key]
        if key in self._lost:
            self.coordinator.forget(key)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("shard supervisor failed", shard_id=key, error=repr(task.exception()))

    @staticmethod
    def _key_of(task: asyncio.Task[None]) -> str:
        return task.get_name().removeprefix("shard:")

    def _lose(self, key: str) -> None:
        """The lease is gone: stop the shard now, mid-batch if need be."""
        self._lost.add(key)
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

    async def _own_shard(self, key: str) -> None:
        """Run the shard's consumer; restart it from the checkpoint if the processor fails."""
        # Every log line of this task, the reader's included, names the shard and worker.
        structlog.contextvars.bind_contextvars(shard_id=key, worker_id=self.worker_id)
        failures = 0
        while True:
            held = self.coordinator.held.get(key)
            if held is None or held.lost:
                return
            consumer: ShardConsumer | None = None
            try:
                # Inside the try: a processor whose constructor fails, or a checkpoint
                # this worker cannot start from, is retried and logged like a failing
                # batch, never left as a lease that is renewed but not read.
                consumer = ShardConsumer(
                    key,
                    self.coordinator,
                    self.stream,
                    self.processor_factory(),
                    timestamp=self._timestamp,
                    limit=self.settings.max_records_per_call,
                    idle_seconds=self.settings.poll_idle_seconds,
                    metrics=self.metrics,
                )
                if self._stopping.is_set() or held.handoff_to:
                    consumer.request_stop()
                self.consumers[key] = consumer
                outcome = await consumer.run()
            except asyncio.CancelledError:
                if key not in self._lost:
                    raise
                if consumer is not None:
                    await consumer.lose()
                outcome = Outcome.LOST
                _uncancel()
            except Exception as exc:
                failures += 1
                delay = backoff(failures, base=1.0, cap=30.0) + 0.5
                self._log.error(
                    "shard failed; restarting it from its checkpoint",
                    shard_id=key,
                    error=repr(exc)[:1000],
                    attempt=failures,
                    delay=round(delay, 2),
                    exc_info=exc,
                )
                if not self._stopping.is_set():
                    await asyncio.sleep(delay)
                if not self._stopping.is_set() and key not in self._lost:
                    continue
                outcome = Outcome.STOPPED
            finally:
                if consumer is not None and self.consumers.get(key) is consumer:
                    del self.consumers[key]
            break
        if outcome is Outcome.LOST or key in self._lost:
            self.coordinator.forget(key)
            return
        await self.coordinator.give_up(key, "shard_end" if outcome is Outcome.ENDED else "shutdown")
        if outcome is Outcome.ENDED:
            self._sync_now.set()


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


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
