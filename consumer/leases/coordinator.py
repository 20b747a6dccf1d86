"""One worker's side of the lease protocol: what it holds, heartbeats, fenced writes.

The coordinator carries out what :mod:`.decisions` decides and keeps, for each lease it
holds, the monotonic time at which its last successful fenced write *started*. Other
workers can only expire the lease ``failover`` seconds after they first saw the
counter that write produced, which is after that start, so until ``start + failover``
no one else can have taken it. Before handing records to a processor or writing a
checkpoint the worker checks that it is well inside that window, and renews first
when it is not (after a pause such as SIGSTOP, a long GC or a stalled event loop):
a frozen worker that wakes up learns it lost its leases before it does anything else.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from consumer.leases.decisions import (
    Seen,
    observe,
    plan_acquisitions,
    ready_keys,
)
from consumer.leases.model import Lease, LeaseLostError, ShardLoad, ShardReport
from consumer.leases.store import LeaseStore, TableMissingError
from consumer.sequence import Checkpoint

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.leases")


@dataclass(slots=True)
class HeldLease:
    """A lease this worker holds, with the time of its last successful fenced write."""

    lease: Lease
    renewed_at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    lost: bool = False
    handoff_to: str | None = None


@dataclass(frozen=True, slots=True)
class PassResult:
    """What a lease pass changed: leases gained, and hand-offs asked of us."""

    taken: tuple[Lease, ...] = ()
    handoffs: tuple[str, ...] = ()


class LeaseCoordinator:
    """Takes, renews, checkpoints and gives up leases for one worker."""

    def __init__(
        self,
        store: LeaseStore,
        worker_id: str,
        failover: float,
        renew_interval: float,
        *,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        metrics: LanderMetrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.lag_ms: dict[str, int] = {}
        """The last MillisBehindLatest per held shard, reported with each heartbeat."""
        self.reports: dict[str, ShardReport] = {}
        """How each held shard's processing goes, reported with each heartbeat."""
        self.loads: dict[str, ShardLoad] = {}
        """Each held shard's measured throughput, written with its checkpoints."""
        self.worker_id = worker_id
        self.failover = failover
        self.renew_interval = renew_interval
        # Looked up now, not at import: a simulation's clock (bench/virtual_time.py) holds.
        self.clock = clock or time.monotonic
        self.rng = rng or random.Random()
        self.held: dict[str, HeldLease] = {}
        self.seen: dict[str, Seen] = {}
        self.listed_shards: set[str] | None = None
        self.consumes: Callable[[str], bool] = _every_lease
        """Whether this worker reads a lease's stream (a multi-stream worker reads the
        streams it has lanes for; other leases are never ready here)."""
        self._owned_elsewhere: list[str] = []
        # A lease is revalidated before use once its last write is this old.
        self.stale_after = min(1.5 * renew_interval, 0.5 * failover)
        self._log = log.bind(worker_id=worker_id)

    def ready(self, leases: Iterable[Lease]) -> set[str]:
        """Leases that may be processed now, of the streams this worker reads."""
        return {key for key in ready_keys(leases, self.listed_shards) if self.consumes(key)}

    # -- scanning and acquiring ------------------------------------------------------

    async def read_table(self, *, consistent: bool = True) -> list[Lease]:
        """Every lease; a missing table (deleted under us) is created again, empty."""
        try:
            return await self.store.list_leases(consistent=consistent)
        except TableMissingError:
            self._log.warning("lease table missing; creating it")
            await self.store.ensure_table()
            return []

    async def scan(self) -> list[Lease]:
        """Read the table and fold it into what this worker has seen."""
        leases = await self.read_table()
        self.seen = observe(self.seen, leases, self.clock())
        self._owned_elsewhere = [
            lease.key
            for lease in leases
            if lease.owner not in (None, self.worker_id) and not lease.finished
        ]
        return leases

    def next_expiry(self) -> float | None:
        """When (on this worker's clock) the first lease owned elsewhere would expire,
        if its counter stays still: the worker scans then, not a scan interval later."""
        times = [self.seen[key].since + self.failover for key in self._owned_elsewhere]
        return min(times) if times else None

    async def lease_pass(self, *, acquire: bool = True) -> PassResult:
        """One pass: scan, notice hand-off requests, take and steal as planned.

        With ``acquire`` false (a worker that cannot land) it takes and asks for
        nothing, and passes on at once any lease that names it as owner without its
        holding it (a hand-off it had asked for arriving late).
        """
        leases = await self.scan()
        if not acquire:
            await self._release_unheld(leases, "this worker cannot land")
            return PassResult()
        handoffs = tuple(
            lease.key
            for lease in leases
            if lease.key in self.held
            and lease.handoff_to is not None
            and lease.owner == self.worker_id
            and self._note_handoff(lease)
        )
        plan = plan_acquisitions(
            self.worker_id,
            leases,
            set(self.held),
            self.seen,
            now=self.clock(),
            failover=self.failover,
            ready=self.ready(leases),
            rng=self.rng,
        )
        taken = []
        for lease in plan.take:
            got = await self._take(lease)
            if got is not None:
                taken.append(got)
        for lease in plan.handoffs:
            if not await self.store.request_handoff(lease, self.worker_id):
                continue
            if self.metrics is not None:
                self.metrics.leases_stolen.inc()
            self._log.info(
                "lease hand-off requested",
                shard_id=lease.key,
                owner=lease.owner,
                target=plan.target,
            )
        return PassResult(tuple(taken), handoffs)

    async def release_unheld(self) -> None:
        """Release every lease the table says is this worker's but it does not hold: one
        handed to it that it has not taken yet. A stopping worker calls this after giving
        up what it holds; otherwise such a lease would wait for the failover time. Its
        own pending hand-off requests are withdrawn first, so an owner cannot hand it a
        lease after it is gone."""
        await self._release_unheld(await self.read_table(), "this worker is stopping")

    async def _release_unheld(self, leases: list[Lease], why: str) -> None:
        for lease in leases:
            if (
                lease.handoff_to == self.worker_id
                and lease.owner != self.worker_id
                and not await self.store.withdraw(lease.key, self.worker_id)
            ):
                # Not named any more: transferred to this worker just now, perhaps.
                lease = await self.store.get_lease(lease.key) or lease  # noqa: PLW2901
            if lease.owner == self.worker_id and lease.key not in self.held:
                try:
                    await self.store.release(lease)
                except LeaseLostError:
                    continue
                self._log.info("lease passed on", shard_id=lease.key, why=why)

    def _note_handoff(self, lease: Lease) -> bool:
        held = self.held[lease.key]
        if held.handoff_to is not None:
            return False
        held.handoff_to = lease.handoff_to
        return True

    async def _take(self, lease: Lease) -> Lease | None:
        started = self.clock()
        try:
            taken = await self.store.take(lease, self.worker_id)
        except LeaseLostError:
            return None
        self.held[taken.key] = HeldLease(taken, started)
        expired = lease.owner not in (None, self.worker_id)
        if self.metrics is not None:
            how = "new" if lease.owner is None else "expired" if expired else "handoff"
            self.metrics.leases_taken.labels(how).inc()
        self._log.info(
            "lease taken",
            shard_id=taken.key,
            previous_owner=lease.owner,
            expired=expired,
            counter=taken.counter,
        )
        return taken

    # -- heartbeats ------------------------------------------------------------------

    async def renew_all(self) -> tuple[list[str], list[str]]:
        """Renew every held lease; returns (lost keys, keys with a hand-off request)."""
        keys = list(self.held)
        results = await asyncio.gather(*(self.renew(key) for key in keys), return_exceptions=True)
        lost: list[str] = []
        handoffs: list[str] = []
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, LeaseLostError):
                lost.append(key)
            elif isinstance(result, BaseException):
                self._log.warning("lease renewal failed", shard_id=key, error=repr(result))
                if self._too_old(key):
                    self._mark_lost(key, "renewals failed for the failover time")
                    lost.append(key)
            elif result:
                handoffs.append(key)
        return lost, handoffs

    async def renew(self, key: str) -> bool:
        """Heartbeat one lease; True if a hand-off has just been requested of it."""
        held = self._held(key)
        async with held.lock:
            self._check(held)
            started = self.clock()
            try:
                held.lease = await self.store.renew(
                    held.lease, self.lag_ms.get(key), self.reports.get(key)
                )
            except LeaseLostError as exc:
                self._mark_lost(key, exc.reason)
                raise
            held.renewed_at = started
        if held.lease.handoff_to is not None and held.handoff_to is None:
            held.handoff_to = held.lease.handoff_to
            return True
        return False

    async def ensure_valid(self, key: str) -> None:
        """Raise LeaseLostError unless the lease is certainly still ours right now."""
        held = self._held(key)
        self._check(held)
        if self.clock() - held.renewed_at >= self.stale_after:
            await self.renew(key)

    def _too_old(self, key: str) -> bool:
        held = self.held.get(key)
        return held is not None and self.clock() - held.renewed_at >= self.failover

    # -- fenced writes by the owner ----------------------------------------------------

    async def checkpoint(self, key: str, checkpoint: Checkpoint) -> Lease:
        """Write a checkpoint under the lease; LeaseLostError if it is not ours."""
        await self.ensure_valid(key)
        held = self._held(key)
        async with held.lock:
            self._check(held)
            started = self.clock()
            try:
                held.lease = await self.store.checkpoint(
                    held.lease, checkpoint, self.loads.get(key), self.lag_ms.get(key)
                )
            except LeaseLostError as exc:
                self._mark_lost(key, exc.reason)
                raise
            held.renewed_at = started
            return held.lease

    async def give_up(self, key: str, why: str = "shutdown") -> str | None:
        """Hand the lease to whoever asked for it, or release it; forget it either way.
        Returns the worker it was handed to (None: released, or lost). A receiver that
        withdrew meanwhile (it is stopping) gets nothing: the lease is released, and so
        is a lease read to its end while the hand-off was pending (there is nothing
        left to read; the receiver's wait ends when the lease no longer names it)."""
        held = self.held.get(key)
        if held is None or held.lost:
            self.forget(key)
            return None
        given: str | None = None
        async with held.lock:
            try:
                to = held.handoff_to
                if to is not None and to != self.worker_id and not held.lease.finished:
                    if await self.store.transfer(held.lease, to):
                        self._log.info("lease handed off", shard_id=key, to=to)
                        why, given = "handoff", to
                    else:
                        await self.store.release(held.lease)
                        self._log.info("lease released", shard_id=key, withdrawn_by=to)
                else:
                    await self.store.release(held.lease)
                    self._log.info("lease released", shard_id=key)
                if self.metrics is not None:
                    self.metrics.leases_released.labels(why).inc()
            except LeaseLostError:
                self._log.info("lease already lost at release", shard_id=key)
            finally:
                self.forget(key)
        return given

    def forget(self, key: str) -> None:
        """Drop a lease from what this worker holds (after it was lost or given up)."""
        self.held.pop(key, None)
        self.lag_ms.pop(key, None)
        self.reports.pop(key, None)
        self.loads.pop(key, None)
        if self.metrics is not None:
            self.metrics.forget_shard(key)

    def is_lost(self, key: str) -> bool:
        """True once a lease this worker held was found taken or expired here (or was
        already forgotten): nothing more may be done under it."""
        held = self.held.get(key)
        return held is None or held.lost

    def lease(self, key: str) -> Lease:
        """The latest known state of a held lease."""
        return self._held(key).lease

    def _held(self, key: str) -> HeldLease:
        held = self.held.get(key)
        if held is None:
            raise LeaseLostError(key, "not held by this worker")
        return held

    def _check(self, held: HeldLease) -> None:
        if held.lost:
            raise LeaseLostError(held.lease.key, "lost earlier")

    def _mark_lost(self, key: str, reason: str) -> None:
        held = self.held.get(key)
        if held is not None and not held.lost:
            held.lost = True
            self._log.warning("lease lost", shard_id=key, reason=reason)
            if self.metrics is not None:
                self.metrics.leases_lost.inc()


def _every_lease(key: str) -> bool:
    return True
