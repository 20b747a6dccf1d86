"""What a worker holds and the fenced writes it makes under its leases.

:class:`LeaseCoordinator` is the part of a worker's coordination that does not depend
on how leases are given: the leases held, the checkpoint (fenced by owner and counter),
giving a lease up or handing it on. :class:`consumer.leases.board_coordinator.
BoardCoordinator` adds the rest (the board slot, the beat, the leader) and decides when
a held lease is still certainly this worker's (:meth:`LeaseCoordinator.ensure_valid`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import structlog

from consumer.leases.decisions import ready_keys
from consumer.leases.model import Lease, LeaseLostError, ShardLoad, ShardReport
from consumer.leases.store import LeaseStore, TableMissingError
from consumer.sequence import Checkpoint

T = TypeVar("T")

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


class LeaseCoordinator:
    """Checkpoints and gives up the leases one worker holds."""

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
        consumes: Callable[[str], bool] | None = None,
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
        self.listed_shards: Set[str] | None = None
        self.consumes: Callable[[str], bool] = consumes or _every_lease
        """Whether this worker reads a lease's stream (a multi-stream worker reads the
        streams it has lanes for; other leases are never ready here)."""
        self.on_taken: Callable[[Lease], None] = _ignore
        self.on_handoff: Callable[[str], None] = _ignore
        self.on_lost: Callable[[str], None] = _ignore
        # A lease is revalidated before use once its last write is this old.
        self.stale_after = min(1.5 * renew_interval, 0.5 * failover)
        self._log = log.bind(worker_id=worker_id)

    # -- what the shards tell it, and are told ------------------------------------------

    def listen(
        self,
        *,
        taken: Callable[[Lease], None],
        handoff: Callable[[str], None],
        lost: Callable[[str], None],
    ) -> None:
        """Who is told that a lease was taken, that its receiver acknowledged a
        hand-off (stop reading), and that it was lost (stop at once)."""
        self.on_taken, self.on_handoff, self.on_lost = taken, handoff, lost

    def listed(self, shards: Set[str] | None) -> None:
        """The shards the streams listed (None: not listed here), for :meth:`ready`."""
        self.listed_shards = shards

    def report(self, key: str, report: ShardReport) -> None:
        """How a held shard's processing goes (written into its lease when troubled)."""
        if key in self.held:
            self.reports[key] = report

    def lagging(self, key: str, millis: int | None) -> None:
        """A held shard's MillisBehindLatest, written with its next checkpoint."""
        if key in self.held and millis is not None:
            self.lag_ms[key] = millis

    def measured(self, key: str, load: ShardLoad) -> None:
        """A held shard's throughput, written with its next checkpoint."""
        if key in self.held:
            self.loads[key] = load

    def load(self, key: str) -> ShardLoad | None:
        """A held shard's throughput as last measured here, or as its lease carries it
        (the previous owner's)."""
        held = self.held.get(key)
        return self.loads.get(key) or (held.lease.load if held is not None else None)

    def held_keys(self) -> list[str]:
        """The keys of the leases held (lost ones too, until forgotten), sorted."""
        return sorted(self.held)

    def holding(self, key: str) -> Lease | None:
        """The lease as last written, if this worker holds it and has not lost it."""
        held = self.held.get(key)
        return None if held is None or held.lost else held.lease

    def handing_off(self, key: str) -> bool:
        """Whether a receiver acknowledged the hand-off of a held lease (stop reading)."""
        held = self.held.get(key)
        return held is not None and held.handoff_to is not None

    def ready(self, leases: Iterable[Lease]) -> set[str]:
        """Leases that may be processed now, of the streams this worker reads."""
        return {key for key in ready_keys(leases, self.listed_shards) if self.consumes(key)}

    async def read_table(self, *, consistent: bool = True) -> list[Lease]:
        """Every lease; a missing table (deleted under us) is created again, empty."""
        try:
            return await self.store.list_leases(consistent=consistent)
        except TableMissingError:
            self._log.warning("lease table missing; creating it")
            await self.store.ensure_table()
            return []

    async def ensure_valid(self, key: str) -> None:
        """Raise LeaseLostError unless the lease is certainly still ours right now."""
        raise NotImplementedError

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

    async def fenced(self, key: str, write: Callable[[Lease], Awaitable[T]]) -> T:
        """Run ``write``, a write of another table conditional on the lease as held
        (owner, counter, incarnation: :mod:`consumer.effects`), under the lease's lock,
        so none of this worker's own lease writes moves the counter meanwhile; a
        LeaseLostError from it marks the lease lost, as a refused checkpoint does."""
        await self.ensure_valid(key)
        held = self._held(key)
        async with held.lock:
            self._check(held)
            try:
                return await write(held.lease)
            except LeaseLostError as exc:
                self._mark_lost(key, exc.reason)
                raise

    async def write_report(self, key: str) -> ShardReport | None:
        """The shard's report (:attr:`reports`, with its lag) into its lease, fenced by
        owner and counter (:mod:`.reports`); the report written, or None if the shard
        has none or its lease is no longer held. LeaseLostError (marked) if refused."""
        held, report = self.held.get(key), self.reports.get(key)
        if held is None or report is None:
            return None
        async with held.lock:
            try:
                held.lease = await self.store.renew(held.lease, self.lag_ms.get(key), report)
            except LeaseLostError as exc:
                self._mark_lost(key, exc.reason)
                raise
        return report

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

    def notice_handoff(self, lease: Lease) -> None:
        """A held lease read with its receiver's acknowledgement: stop the shard after
        the batch in hand, then hand it over (:meth:`give_up`)."""
        held = self.held.get(lease.key)
        if held is None or held.handoff_to is not None:
            return
        if lease.handoff_to is not None and lease.handoff_ack == lease.handoff_to:
            held.handoff_to = lease.handoff_to
            self._log.info("hand-off acknowledged", shard_id=lease.key, to=lease.handoff_to)
            self.on_handoff(lease.key)

    def forget(self, key: str) -> None:
        """Drop a lease from what this worker holds (after it was lost or given up)."""
        self.held.pop(key, None)
        self.lag_ms.pop(key, None)
        self.reports.pop(key, None)
        self.loads.pop(key, None)
        if self.metrics is not None:
            self.metrics.forget_shard(key)

    def holds(self, key: str) -> bool:
        """Whether this worker holds the lease (lost or not)."""
        return key in self.held

    def unasked(self) -> list[Lease]:
        """The leases held, not lost, that no one asked to be handed over."""
        return [
            held.lease
            for held in self.held.values()
            if not held.lost and held.lease.handoff_to is None
        ]

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

    def lose(self, key: str, reason: str) -> None:
        """Mark a held lease lost and stop its shard."""
        self._mark_lost(key, reason)
        self.on_lost(key)

    def _mark_lost(self, key: str, reason: str) -> None:
        held = self.held.get(key)
        if held is not None and not held.lost:
            held.lost = True
            self._log.warning("lease lost", shard_id=key, reason=reason)
            if self.metrics is not None:
                self.metrics.leases_lost.inc()


def _every_lease(key: str) -> bool:
    return True


def _ignore(*_: object) -> None:
    return None
