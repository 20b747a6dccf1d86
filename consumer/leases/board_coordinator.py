"""One worker's side of board coordination (:mod:`.board`): beats, the acting window,
incoming leases and notices, and the leader's duties.

The worker acts on its leases only within ``stale_after`` of the start of its last
successful beat (:meth:`ensure_valid` beats first when that is older), and its lease
writes are fenced by counter and owner. No lease is renewed: a lease's counter moves
when it is taken, checkpointed, handed over or released.

- **Incoming** (a key the leader gave, or a hand-off to this worker): read the lease
  strongly; if it names this worker, take it (a fenced write) and start the shard; if
  it is a hand-off to this worker, acknowledge it, notify its owner, and poll the lease
  until the owner transfers it.
- **Notice**: read the leases that name this worker (the owner index) and the ones it
  holds: take what it was given, stop what was lost, and hand over what a receiver
  acknowledged (the owner stops reading only once the receiver polls, so the gap
  between the two readers is one poll).
- **Leader** (:meth:`lead_pass`, every second): fence slots whose counters stood still
  for the failover time, find their leases (the owner index), sweep the leases with an
  eventually consistent Scan every sweep interval, give free ready leases and ask for
  hand-offs by :func:`.board.plan_assignment`, and remove fenced slots nothing names.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from consumer.leases.board import LEAD_SECONDS, Board, Slot, line, watch
from consumer.leases.coordinator import HeldLease, LeaseCoordinator
from consumer.leases.decisions import Seen
from consumer.leases.handoff import await_ack, await_handoff, release_unheld, start_leaving
from consumer.leases.identity import join_board
from consumer.leases.leader import Leader
from consumer.leases.model import Lease, LeaseError, LeaseLostError
from consumer.leases.reports import CpuMeter, TroubleReports, write_report
from consumer.leases.store import CoordinatedStore, SlotLostError, TableMissingError
from consumer.leases.wake import Waker
from consumer.sequence import Checkpoint

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.leases")

LEAVING_BEAT_SECONDS = 0.2
"""How often a leaving worker beats, to see acknowledgements of its hand-offs soon."""


def _ignore(*_: object) -> None:
    return None


class BoardCoordinator(LeaseCoordinator):
    """Beats on the board and carries out what the leader decides."""

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
    ) -> None:
        super().__init__(
            store, worker_id, failover, renew_interval, clock=clock, rng=rng, metrics=metrics
        )
        self.board_store = store
        self.sweep_seconds = sweep_seconds
        self.sleep = sleep
        self.instance = instance or secrets.token_hex(8)
        """The process's token on its slot: its claim on the worker id (64 bits)."""
        self.address = address
        """``host:port`` where others wake this worker (:mod:`.wake`), if anywhere."""
        self.waker = Waker(worker_id, metrics)
        self.slot: Slot | None = None
        """This worker's slot as its last beat wrote it (None until joined)."""
        self.board = Board()
        self.beat_started: float | None = None
        self.slot_seen: dict[str, Seen] = {}
        self.leaving = False
        """Hand every lease on and take none (stopping, or unable to land)."""
        self.stopping = False
        self.on_taken: Callable[[Lease], None] = _ignore
        self.on_handoff: Callable[[str], None] = _ignore
        self.on_lost: Callable[[str], None] = _ignore
        self._read = 0
        self.cpu = CpuMeter()
        self.troubles = TroubleReports(renew_interval)
        self._notices: int | None = None
        self._beat_lock = asyncio.Lock()
        self.waits: dict[str, asyncio.Task[None]] = {}
        self.acks: dict[str, asyncio.Task[None]] = {}
        self.leader = Leader(self)  # the leader's duties, carried out while this worker leads

    # -- beats -----------------------------------------------------------------------

    async def join(self) -> None:
        """Take a fresh slot (the process's claim on its worker id), then the leases
        that already name this worker (a restart under the same worker id)."""
        started = self.clock()
        try:
            board = await self._join()
        except TableMissingError:
            self._log.warning("lease table missing; creating it")
            await self.store.ensure_table()
            started = self.clock()
            board = await self._join()
        self._accept(board, started)
        self._read = len(self.slot.incoming) if self.slot else 0
        self._log.info("joined the board", joined=self.slot.joined if self.slot else None)
        order = line(self.board, self.slot_seen, self.clock(), self.failover)
        if order:
            self.wake(order[0])  # the leader plans with the newcomer from its next pass
        await self.read_own_leases()

    async def _join(self) -> Board:
        claim = (self.board_store, self.worker_id, self.instance, self.failover)
        return await join_board(*claim, clock=self.clock, sleep=self.sleep, address=self.address)

    def fresh(self) -> bool:
        """Whether this worker is inside its acting window."""
        return (
            self.slot is not None
            and self.beat_started is not None
            and self.clock() - self.beat_started < self.stale_after
        )

    def position(self) -> int | None:
        """This worker's place in the line (0: the leader), None if not in it."""
        order = line(self.board, self.slot_seen, self.clock(), self.failover)
        return order.index(self.worker_id) if self.worker_id in order else None

    def beat_delay(self) -> float:
        """The leader and the next in line beat every second; a leaving worker faster;
        the others every renew interval."""
        if self.stopping:
            return LEAVING_BEAT_SECONDS
        position = self.position()
        if position is not None and position <= 1:
            return min(LEAD_SECONDS, self.renew_interval)
        return self.renew_interval

    async def beat_pass(self) -> None:
        """Beat, then act on what the board says: incoming leases and notices. A worker
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
        async with self._beat_lock:
            if self.slot is None:
                raise LeaseLostError("*", "not on the board")
            started = self.clock()
            read = self._read
            try:
                board = await self.board_store.beat(
                    self.worker_id,
                    self.slot.counter,
                    held=len(self.held),
                    leaving=self.leaving,
                    read=read,
                    cpu=self.cpu.percent(),
                )
            except SlotLostError as exc:
                self._lose_all(str(exc))
                raise LeaseLostError("*", str(exc)) from None
            self._read -= read
            self._accept(board, started)

    def _accept(self, board: Board, started: float) -> None:
        self.board = board
        self.slot = board.slots.get(self.worker_id)
        self.beat_started = started
        self.slot_seen = watch(self.slot_seen, board, self.clock())

    def _lose_all(self, reason: str) -> None:
        self._log.error("board slot lost: every lease with it", reason=reason, held=len(self.held))
        self.slot = None
        self.beat_started = None
        self._notices = None
        self._read = 0
        for key in list(self.held):
            self.lose(key, reason)

    def lose(self, key: str, reason: str) -> None:
        """Mark a held lease lost and stop its shard."""
        self._mark_lost(key, reason)
        self.on_lost(key)

    async def _after_beat(self) -> None:
        slot = self.slot
        if slot is None:
            return
        # Counted as read once handled, so the next beat drops exactly those (a beat in
        # between, from ensure_valid, drops its share and subtracts it).
        for key in slot.incoming[self._read :]:
            await self._incoming(key)
            self._read += 1
        if self._notices != slot.notices:
            await self.read_own_leases()
            self._notices = slot.notices
        for key in self.troubles.due(self.reports, set(self.held), self.clock()):
            await write_report(self, key)

    async def ensure_valid(self, key: str) -> None:
        """Raise LeaseLostError unless the lease is certainly still ours right now."""
        held = self._held(key)
        self._check(held)
        if not self.fresh():
            await self.beat()
            self._check(held)

    async def checkpoint(self, key: str, checkpoint: Checkpoint) -> Lease:
        """Write a checkpoint; a hand-off acknowledged by its receiver is noticed here."""
        lease = await super().checkpoint(key, checkpoint)
        self.notice_handoff(lease)
        return lease

    # -- incoming leases, notices, hand-offs ------------------------------------------------

    async def _incoming(self, key: str) -> None:
        lease = await self.store.get_lease(key)
        if lease is None:
            return
        if lease.owner == self.worker_id:
            if key not in self.held:
                await self.take_given(lease)
        elif (
            lease.handoff_to == self.worker_id
            and not self.leaving
            and key not in self.waits
            and await self.store.acknowledge(key, self.worker_id)
        ):
            if lease.owner is not None:
                await self.notify(lease.owner)
            self.waits[key] = asyncio.create_task(await_handoff(self, key, lease.owner))

    async def take_given(self, lease: Lease) -> None:
        """Take a lease that names this worker; one that arrives while this worker
        leaves (or cannot land) is passed on at once."""
        if self.leaving:
            await self._pass_on(lease)
            return
        if not self.fresh():  # a slow beat ended outside the window: beat, never drop it
            with contextlib.suppress(LeaseLostError):
                await self.beat()
            if not self.fresh():
                return
        started = self.clock()
        try:
            taken = await self.store.take(lease, self.worker_id)
        except LeaseLostError:
            return
        self.held[taken.key] = HeldLease(taken, started)
        if self.metrics is not None:
            self.metrics.leases_taken.labels("assigned").inc()
        self._log.info("lease taken", shard_id=taken.key, counter=taken.counter)
        self.on_taken(taken)

    async def read_own_leases(self) -> None:
        """Take leases that name this worker; stop lost ones; notice acknowledged
        hand-offs."""
        keys = set(await self.store.owned_by(self.worker_id)) | set(self.held)
        for key in sorted(keys):
            lease = await self.store.get_lease(key)
            held = self.held.get(key)
            if held is None:
                if lease is not None and lease.owner == self.worker_id:
                    await self.take_given(lease)
                continue
            if lease is None or lease.owner != self.worker_id:
                self._mark_lost(key, "the lease names another owner")
                self.on_lost(key)
                continue
            self.notice_handoff(lease)
            pending = lease.handoff_to is not None and lease.handoff_ack != lease.handoff_to
            if pending and key not in self.acks:
                self.acks[key] = asyncio.create_task(await_ack(self, key))

    async def _pass_on(self, lease: Lease) -> None:
        try:
            await self.store.release(lease)
        except LeaseLostError:
            return
        self._log.info("lease passed on", shard_id=lease.key, why="this worker is leaving")
        await self._notify_leader()

    def notice_handoff(self, lease: Lease) -> None:
        held = self.held.get(lease.key)
        if held is None or held.handoff_to is not None:
            return
        if lease.handoff_to is not None and lease.handoff_ack == lease.handoff_to:
            held.handoff_to = lease.handoff_to
            self._log.info("hand-off acknowledged", shard_id=lease.key, to=lease.handoff_to)
            self.on_handoff(lease.key)

    async def give_up(self, key: str, why: str = "shutdown") -> str | None:
        """Hand over or release. A release tells the leader (its leases need a home); a
        transfer tells the receiver (it may have stopped polling before it came)."""
        to = await super().give_up(key, why)
        if to is None:
            await self._notify_leader()
        else:
            with contextlib.suppress(LeaseError):
                await self.notify(to)
        return to

    async def _notify_leader(self) -> None:
        order = line(self.board, self.slot_seen, self.clock(), self.failover)
        if order and order[0] != self.worker_id:
            with contextlib.suppress(Exception):
                await self.notify(order[0])
        elif order:
            self.leader.want_sweep()

    async def start_leaving(self) -> None:
        """Flag the slot as leaving; ask every hand-off (:func:`.handoff.start_leaving`)."""
        await start_leaving(self)

    async def leave(self) -> None:
        """After every lease is given up: take the slot off the board, under the beat
        lock (a beat in flight would move the counter the removal is conditioned on)."""
        tasks = [*self.waits.values(), *self.acks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.leader.before_leaving()
        async with self._beat_lock:
            if self.slot is not None and not await self.board_store.remove_slot(
                self.worker_id, counter=self.slot.counter
            ):
                self._log.warning("board slot not removed; the leader fences it in time")
            self.slot = None
        await self.waker.close()

    async def release_unheld(self) -> None:
        """Release leases naming this worker that it does not hold (:mod:`.handoff`)."""
        await release_unheld(self)

    # -- telling others: the board, then a wake-up ---------------------------------------

    async def deliver(self, worker: str, keys: list[str]) -> None:
        """Append lease keys to a worker's incoming list, and wake it."""
        await self.board_store.deliver(worker, keys)
        self.wake(worker)

    async def notify(self, worker: str) -> None:
        """Have a worker read its own leases again, and wake it."""
        await self.board_store.notify(worker)
        self.wake(worker)

    def wake(self, worker: str) -> None:
        """Wake a worker that gave an address (:mod:`.wake`); the others beat anyway."""
        slot = self.board.slots.get(worker)
        if worker != self.worker_id and slot is not None and slot.address is not None:
            self.waker.send(worker, slot.address)

    # -- the leader ------------------------------------------------------------------------

    def has_receivers(self) -> bool:
        """Whether another live worker could receive this worker's leases."""
        order = line(self.board, self.slot_seen, self.clock(), self.failover)
        return any(w != self.worker_id and not self.board.slots[w].leaving for w in order)

    def is_leader(self) -> bool:
        """Whether this worker leads (first in line), as far as its board shows."""
        return self.position() == 0

    async def lead_pass(self) -> None:
        """The leader's duties, if this worker leads (:class:`.leader.Leader`)."""
        await self.leader.lead_pass()

    def want_sweep(self) -> None:
        """Have the next leader pass read the leases again (new leases were created)."""
        self.leader.want_sweep()
