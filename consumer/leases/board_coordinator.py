"""One worker's side of board coordination (:mod:`.board`): beats, the acting window,
incoming leases and notices, and the leader's duties.

The worker acts on its leases only within ``stale_after`` of the start of its last
successful beat (:meth:`ensure_valid` beats first when that is older), and its lease
writes are fenced by counter and owner. No lease is renewed: a lease's counter moves
when it is taken, checkpointed, handed over or released.

- **Incoming** (a key the leader gave, or a hand-off to this worker): read the lease
  strongly; take it if it names this worker; if it is a hand-off to this worker,
  acknowledge it, notify its owner, and poll the lease until the owner transfers it.
- **Notice**: read the leases that name this worker (the owner index) and the ones it
  holds: take what it was given, stop what was lost, hand over what a receiver
  acknowledged (the owner stops reading once the receiver polls).
- **Leader** (:meth:`lead_pass`, every second): keep or watch the leader item
  (:mod:`.succession`); while leading, the leader's duties (:mod:`.leader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from consumer.aio import CONCURRENT_CALLS, batched
from consumer.leases.board import LEAVING_BEAT_SECONDS, Slot, deputy_for
from consumer.leases.coordinator import HeldLease, LeaseCoordinator
from consumer.leases.handoff import Handoffs
from consumer.leases.heartbeat import Heartbeat
from consumer.leases.leader import Leader
from consumer.leases.model import TABLE_GONE, Lease, LeaseError, LeaseLostError
from consumer.leases.reports import TroubleReports
from consumer.leases.roster import Roster
from consumer.leases.store import CoordinatedStore, SlotLostError, TableMissingError
from consumer.leases.succession import Succession
from consumer.leases.wake import Courier, address_of
from consumer.sequence import Checkpoint

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.leases")


class BoardCoordinator(LeaseCoordinator):
    """Beats on its slot and carries out what the leader decides."""

    def __init__(
        self,
        store: CoordinatedStore,
        worker_id: str,
        failover: float,
        renew_interval: float,
        *,
        sweep_seconds: float = 60.0,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        metrics: LanderMetrics | None = None,
        instance: str | None = None,
        address: str | None = None,
        consumes: Callable[[str], bool] | None = None,
        stall_seconds: float = 300.0,
    ) -> None:
        super().__init__(
            store,
            worker_id,
            failover,
            renew_interval,
            clock=clock,
            rng=rng,
            metrics=metrics,
            consumes=consumes,
        )
        self.heart = Heartbeat(
            store,
            worker_id,
            failover=failover,
            stale_after=self.stale_after,
            clock=self.clock,
            sleep=sleep,
            instance=instance or secrets.token_hex(8),  # the process's claim on the id
            address=address,
        )
        self.courier = Courier(store, worker_id, self._address_of, metrics)
        self.roster = Roster(store, self.clock, failover)
        """The workers table as last read (every second while leading)."""
        self.succession = Succession(store, worker_id, failover, self.stale_after, self.clock)
        self.leaving = False
        """Hand every lease on and take none (stopping, or unable to land)."""
        self.unfit = False
        """Leaving because the worker cannot land (shown by ``lander status``)."""
        self.stopping = False
        self.troubles = TroubleReports(renew_interval, stall_seconds)
        self._notices: int | None = None
        self._taking: set[str] = set()
        self.handoffs = Handoffs(
            store,
            self.courier,
            self,
            worker_id,
            failover=failover,
            renew_interval=renew_interval,
            clock=self.clock,
        )
        self.leader = Leader(  # the leader's duties, carried out while this worker leads
            self,
            store,
            self.roster,
            self.courier,
            worker_id,
            failover=failover,
            sweep_seconds=sweep_seconds,
            clock=self.clock,
            rng=self.rng,
            metrics=metrics,
        )

    # -- beats -----------------------------------------------------------------------

    async def join(self) -> None:
        """Take a fresh slot (the process's claim on its worker id), learn who leads (or
        lead), then take the leases that name this worker (a restart under its id)."""
        slot = await self.heart.join()
        self._log.info("joined the fleet", joined=slot.joined)
        await self.succession.watch(self.heart.address)
        leader = self.succession.leader
        if leader is not None and leader != self.worker_id:
            self.courier.wake(leader)  # the leader plans with the newcomer from its next pass
        try:
            await self.read_own_leases()
        except TableMissingError:  # deleted as this worker joined
            await self.table_gone()

    def advertise(self, address: str | None) -> None:
        """Be woken at ``address`` (:mod:`.wake`) from the next join on."""
        self.heart.advertise(address)

    @property
    def slot(self) -> Slot | None:
        """This worker's slot as its last beat wrote it (None off the board)."""
        return self.heart.slot

    def fresh(self) -> bool:
        """Whether this worker is inside its acting window."""
        return self.heart.fresh()

    def beat_delay(self) -> float:
        """Every renew interval; a leaving worker faster."""
        return LEAVING_BEAT_SECONDS if self.stopping else self.renew_interval

    async def beat_pass(self) -> None:
        """Beat, then act on what the slot says: incoming leases and notices. A worker
        without a slot joins again, unless it is stopping (it just left)."""
        if self.slot is None:
            if not self.stopping:
                await self.join()
            return
        try:
            await self.beat()
        except LeaseLostError:
            return  # every lease is lost; the next pass joins again
        await self._after_beat()

    async def beat(self) -> None:
        """One beat; on refusal every lease is lost and the next pass joins again."""
        try:
            await self.heart.beat(held=len(self.held), leaving=self.leaving, unfit=self.unfit)
        except SlotLostError as exc:
            self._lose_all(str(exc))
            raise LeaseLostError("*", str(exc)) from None

    def _lose_all(self, reason: str) -> None:
        self._log.error("slot lost: every lease with it", reason=reason, held=len(self.held))
        self.heart.drop()
        self._notices = None
        for key in list(self.held):
            self.lose(key, reason)

    def forget(self, key: str) -> None:
        """Drop a lease; after a loss, the next beat reads this worker's leases again:
        one still naming it (another incarnation: the table made again) is taken."""
        if self.is_lost(key):
            self._notices = None
        super().forget(key)

    async def _after_beat(self) -> None:
        slot = self.slot
        if slot is None:
            return
        keys = self.heart.unhandled()
        for start in range(0, len(keys), CONCURRENT_CALLS):  # a joiner's hundreds at once
            chunk = keys[start : start + CONCURRENT_CALLS]
            owners = await batched([self._incoming(key) for key in dict.fromkeys(chunk)])
            acked: dict[str, list[str]] = {}
            for key, owner in zip(dict.fromkeys(chunk), owners, strict=True):
                if owner is not None:  # the owner reads that lease: the ack is there
                    acked.setdefault(owner, []).append(key)
            await batched([self.courier.deliver(owner, ks) for owner, ks in acked.items()])
            self.heart.handled(len(chunk))
        if self._notices != slot.notices:
            await self.read_own_leases()
            self._notices = slot.notices
            self.succession.read_soon()
        for key in self.troubles.due(self.reports, set(self.held), self.clock()):
            try:
                written = await self.write_report(key) if self.fresh() else None
            except LeaseLostError as exc:
                self.lose(key, exc.reason)
                continue
            if written is not None:
                self.troubles.wrote(key, written, self.clock())

    async def ensure_valid(self, key: str) -> None:
        """Raise LeaseLostError unless the lease is certainly still ours right now."""
        held = self._held(key)
        self._check(held)
        if not self.fresh():
            await self.beat()
            self._check(held)

    async def checkpoint(self, key: str, checkpoint: Checkpoint) -> Lease:
        """Write a checkpoint; a hand-off acknowledged by its receiver is noticed here."""
        try:
            lease = await super().checkpoint(key, checkpoint)
        except LeaseLostError as exc:
            if exc.reason == TABLE_GONE:
                await self.table_gone()
            raise
        self.notice_handoff(lease)
        return lease

    async def table_gone(self) -> None:
        """The lease table was deleted, every lease with it: create it, tell the leader."""
        self._log.warning("lease table missing; creating it", held=len(self.held))
        for key in list(self.held):
            self.lose(key, TABLE_GONE)
        await self.store.ensure_table()
        await (self.leader.table_gone() if self.is_leader() else self.notify_leader())

    # -- incoming leases, notices, hand-offs ------------------------------------------------

    async def _incoming(self, key: str) -> str | None:
        """Act on a key delivered to this worker; the owner to tell of an ack, if any."""
        before = self.held.get(key)
        lease = await self.store.get_lease(key)
        if lease is None:
            return None
        if lease.owner == self.worker_id:
            await self._own(key, lease, before)
        elif (
            lease.handoff_to == self.worker_id
            and not self.leaving
            and not self.handoffs.receiving(key)
            and await self.store.acknowledge(key, self.worker_id)
        ):
            self.handoffs.receive(key, lease.owner)
            return lease.owner
        return None

    async def take_given(self, lease: Lease) -> Lease | None:
        """Take a lease that names this worker; one that arrives while this worker
        leaves (or cannot land) is passed on at once. The lease taken, if it was."""
        if self.leaving:
            await self.handoffs.pass_on(lease)
            return None
        if not self.fresh():  # a slow beat ended outside the window: beat, never drop it
            with contextlib.suppress(LeaseLostError):
                await self.beat()
            if not self.fresh():
                return None
        if lease.key in self._taking:  # a poll and a delivery found it given together
            return None
        held = self.held.get(lease.key)
        if held is not None and held.lease.incarnation != lease.incarnation:
            # The table was made again while this worker read the shard under the
            # earlier lease: that reading stops (the new lease starts at its own
            # checkpoint), and the new lease is taken once it has (the next beat
            # reads this worker's leases again). Taken now, the old reading would go
            # on from memory under the new lease, and the new checkpoint be skipped.
            self.lose(lease.key, "another incarnation (the table was made again)")
            return None
        started = self.clock()
        self._taking.add(lease.key)
        try:
            taken = await self.store.take(lease, self.worker_id)
        except LeaseLostError:
            return None
        finally:
            self._taking.discard(lease.key)
        self.held[taken.key] = HeldLease(taken, started)
        if self.metrics is not None:
            self.metrics.leases_taken.labels("assigned").inc()
        self._log.info("lease taken", shard_id=taken.key, counter=taken.counter)
        self.on_taken(taken)
        return taken

    async def read_own_leases(self) -> None:
        """Every lease naming this worker or held by it, read strongly (:meth:`_own`)."""
        keys = sorted(set(await self.store.owned_by(self.worker_id)) | set(self.held))
        before = [self.held.get(key) for key in keys]
        leases = await batched([self.store.get_lease(key) for key in keys])
        for key, lease, was in zip(keys, leases, before, strict=True):
            await self._own(key, lease, was)

    async def _own(self, key: str, lease: Lease | None, before: HeldLease | None) -> None:
        """Take a lease given; stop a lost one; notice or watch a hand-off asked of it.
        A lease taken (or dropped) while it was read is left alone: the read is older."""
        held = self.held.get(key)
        if held is not before:
            return
        if held is None:
            if lease is not None and lease.owner == self.worker_id:
                await self.take_given(lease)
            return
        ours = (self.worker_id, held.lease.incarnation)
        if lease is None or (lease.owner, lease.incarnation) != ours:
            self.lose(key, "another owner, or another incarnation (the table was made again)")
            return
        self.notice_handoff(lease)
        if lease.handoff_to is not None and lease.handoff_ack != lease.handoff_to:
            self.handoffs.watch_ack(key)

    async def give_up(self, key: str, why: str = "shutdown") -> str | None:
        """Hand over or release. A release tells the leader (its leases need a home); a
        transfer tells the receiver (it may have stopped polling before it came)."""
        to = await super().give_up(key, why)
        if to is None:
            await self.notify_leader()
        else:
            with contextlib.suppress(LeaseError):
                await self.courier.deliver(to, [key])
        return to

    async def notify_leader(self) -> None:
        """Tell the leader a lease needs a home (or sweep, if this worker leads)."""
        leader = self.succession.leader
        if leader == self.worker_id:
            self.leader.want_sweep()
        elif leader is not None:
            with contextlib.suppress(Exception):
                await self.courier.notify(leader)

    async def start_leaving(self) -> None:
        """Flag the slot as leaving and ask for the hand-off of every held lease at once
        (:meth:`.handoff.Handoffs.ask_all`: the leader would ask the same at its next
        pass; this saves that wait)."""
        self.leaving = self.stopping = True
        if self.slot is None:
            return
        with contextlib.suppress(LeaseLostError):
            await self.beat()
        try:
            board = await self.roster.read()
        except LeaseError as exc:  # the leader hands the leases on when it sees the flag
            self._log.warning("leaving: could not read the workers table", error=str(exc))
            return
        await self.handoffs.ask_all(self.unasked(), board, self.roster.line())

    async def leave(self) -> None:
        """After every lease is given up: take the slot off the board, under the beat
        lock (a beat in flight would move the counter the removal is conditioned on)."""
        await self.handoffs.stop()
        await self.leader.before_leaving()
        if not await self.heart.remove():
            self._log.warning("slot not removed; the leader fences it in time")
        with contextlib.suppress(LeaseError):
            await self.succession.resign()
        await self.courier.close()

    async def release_unheld(self) -> None:
        """Release leases naming this worker that it does not hold (:mod:`.handoff`)."""
        await self.handoffs.release_unheld()

    # -- the leader ------------------------------------------------------------------------

    def has_receivers(self) -> bool:
        """Whether another live worker could receive this worker's leases."""
        return bool(self.roster.receivers(self.worker_id))

    def is_leader(self) -> bool:
        """Whether this worker holds the leader item, inside both acting windows."""
        return self.fresh() and self.succession.leads()

    def is_deputy(self) -> bool:
        """Whether the leader item names this worker its deputy, inside its window."""
        return self.fresh() and self.succession.is_deputy()

    def notices(self) -> int | None:
        """The notices counter of this worker's slot, as its last beat wrote it."""
        return None if self.slot is None else self.slot.notices

    async def lead_pass(self) -> None:
        """Keep or watch the leader item (:mod:`.succession`), then the leader's duties
        if this worker leads (:class:`.leader.Leader`)."""
        if self.slot is not None:  # a leader keeps leading until it has left
            deputy = await self.succession.step(self.heart.address, self._deputy, not self.stopping)
            if deputy is not None:
                with contextlib.suppress(LeaseError):
                    await self.courier.notify(deputy)
        await self.leader.lead_pass()

    def _address_of(self, worker: str) -> str | None:
        return address_of(self.roster.board, self.succession.leadership, worker)

    def _deputy(self) -> str | None:
        return deputy_for(self.roster.line(), self.roster.board, self.worker_id)
