"""The leader's duties under board coordination (:mod:`.board`).

The leader is the live slot that joined first, as each worker's board shows it. Every
second it fences slots whose counters stood still for the failover time (a conditional
write on the counter it watched), reads again the leases of fenced and leaving
workers (the owner index, then each item strongly), reads every lease with an
eventually consistent Scan every sweep interval (or when told something changed),
gives free ready leases and asks for hand-offs as :func:`.board.plan_assignment`
decides, and removes fenced slots nothing names any more. Its writes are conditional
like every other, so a second worker that believes it leads for a moment (a leader
paused and not yet fenced) only loses races.

A lease given to a worker whose leaving flag the leader had not seen yet may reach it
after its last look at the leases naming it: nobody would read that shard until the
receiver's slot expired, and, when the whole fleet stops at once, the lease would stay
owned after every worker exited. The leader remembers what it gave for a while and,
each pass and once more before it leaves itself, releases a lease still exactly as
given (same counter: the receiver never took it) whose receiver is leaving or gone
(:meth:`Leader.take_back`). The release is conditional like every write, so it cannot
undo a take; a receiver that passes the lease on itself just wins the race.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from consumer.leases.board import LEAD_SECONDS, Board, line, plan_assignment, to_fence
from consumer.leases.decisions import Seen, observe
from consumer.leases.model import Lease, LeaseLostError

if TYPE_CHECKING:
    from consumer.leases.board_coordinator import BoardCoordinator

log = structlog.get_logger("consumer.leases")


class Leader:
    """What a worker does while it leads; state that only the leader keeps."""

    def __init__(self, worker: BoardCoordinator) -> None:
        self.worker = worker
        self._log = log.bind(worker_id=worker.worker_id)
        self.view: dict[str, Lease] = {}
        """Every lease as the leader last read or wrote it."""
        self._view_seen: dict[str, Seen] = {}
        self._swept_at: float | None = None
        self._sweep_wanted = True
        self._refresh: set[str] = set()
        """Workers whose leases are read again (fenced, or leaving)."""
        self._leading = False
        self._lead_notices: int | None = None
        self.given: dict[str, tuple[Lease, float]] = {}
        """Leases given to other workers, as written, and when (for :meth:`take_back`)."""
        self._passing = asyncio.Lock()
        self._retired = False
        """Set by :meth:`before_leaving`: no pass gives anything after it."""
        self.asked: dict[str, float] = {}
        """When this leader asked each hand-off still pending in its view."""

    async def lead_pass(self) -> None:
        """The leader's duties, if this worker leads and is inside its acting window."""
        async with self._passing:
            if not self._retired:
                await self._lead_pass()

    async def _lead_pass(self) -> None:
        w = self.worker
        if not w.is_leader() or not w.fresh():
            if self._leading:
                self._log.info("no longer leading")
            self._leading = False
            self.view = {}
            self._swept_at = None
            return
        if not self._leading:
            self._log.info("leading", workers=len(w.board.slots))
            self._leading = True
            self._sweep_wanted = True
        if w.slot is not None and self._lead_notices != w.slot.notices:
            self._lead_notices = w.slot.notices
            self._sweep_wanted = True
        now = w.clock()
        board = w.board
        for worker in to_fence(board, w.slot_seen, now, w.failover):
            if worker == w.worker_id:
                continue
            if await w.board_store.fence(worker, board.slots[worker].counter):
                self._log.warning("worker fenced: its heartbeat stood still", fenced=worker)
                board = _fenced(board, worker)
                self._refresh.add(worker)
        w.board = board
        for worker, slot in board.slots.items():
            if slot.leaving and worker not in self._refresh:
                self._refresh.add(worker)
        due = self._swept_at is None or now - self._swept_at >= w.sweep_seconds
        if due or self._sweep_wanted:
            await self.sweep()
        for worker in sorted(self._refresh):
            await self._reread(worker)
        self._refresh = {n for n, slot in board.slots.items() if slot.leaving} - {w.worker_id}
        astray = self._astray(board) if due else []
        await self._check_asked(now)
        await self.take_back(board)
        await self._assign(board)
        if due:
            for worker in astray:  # a lost delivery: have it read its leases again
                if worker == w.worker_id:
                    await w.read_own_leases()
                else:
                    await w.notify(worker)
            await self._remove_dead_slots(board)

    async def sweep(self) -> None:
        """Read every lease, eventually consistent: the leader's view."""
        w = self.worker
        leases = await w.read_table(consistent=False)
        self.view = {lease.key: lease for lease in leases}
        self._view_seen = observe(self._view_seen, leases, w.clock())
        self._swept_at = w.clock()
        self._sweep_wanted = False

    def _astray(self, board: Board) -> list[str]:
        """Live workers whose held count (from their last beat) is below the leases
        naming them in a fresh sweep: a delivery lost on the way, or a take refused. A
        lease being handed over counts for its owner, which holds it until the
        transfer (left out, it would hide a lease given to that owner and not taken)."""
        named = Counter(
            lease.owner
            for lease in self.view.values()
            if lease.owner is not None and not lease.finished
        )
        return sorted(
            worker
            for worker, slot in board.slots.items()
            if not slot.fenced and not slot.leaving and named[worker] > slot.held
        )

    def delay(self) -> float:
        """Seconds to the next pass: a second, or, for a leader or deputy inside its
        acting window, sooner when a slot it watches would expire (so a dead worker is
        fenced at failover, not up to a second later). A worker that cannot beat sees
        every slot stand still on its old board: it must not pass every 10 ms."""
        w = self.worker
        position = w.position()
        if position is None or position > 1 or not w.fresh():
            return LEAD_SECONDS
        now = w.clock()
        due = [
            seen.since + w.failover
            for worker, seen in w.slot_seen.items()
            if worker != w.worker_id
            and worker in w.board.slots
            and not w.board.slots[worker].fenced
            and seen.counter == w.board.slots[worker].counter
        ]
        delay = LEAD_SECONDS
        if due:
            delay = min(delay, max(0.05, min(due) - now + 0.01))
        return delay

    def current_view(self) -> list[Lease] | None:
        """The leases as this leader knows them, if it leads and has swept."""
        return list(self.view.values()) if self._leading and self._swept_at is not None else None

    def want_sweep(self) -> None:
        """Have the next pass read the leases again."""
        self._sweep_wanted = True

    async def _reread(self, worker: str) -> None:
        w = self.worker
        for key in await w.store.owned_by(worker):
            lease = await w.store.get_lease(key)
            if lease is not None:
                self.view[key] = lease
        for key, lease in list(self.view.items()):
            if lease.owner == worker:
                fresh = await w.store.get_lease(key)
                if fresh is None:
                    self.view.pop(key, None)
                else:
                    self.view[key] = fresh

    async def _assign(self, board: Board) -> None:
        w = self.worker
        order = line(board, w.slot_seen, w.clock(), w.failover)
        plan = plan_assignment(
            self.view.values(),
            board,
            order,
            ready=w.ready(self.view.values()),
            lease_seen=self._view_seen,
            now=w.clock(),
            failover=w.failover,
            rng=w.rng,
        )
        deliveries: dict[str, list[str]] = {}
        gives = await batched([self._give(lease, to) for lease, to in plan.give])
        for (_, to), given in zip(plan.give, gives, strict=True):
            if given is not None and to != w.worker_id:
                deliveries.setdefault(to, []).append(given.key)
        owners: set[str] = set()
        asks = await batched([self._ask(lease, to) for lease, to in plan.handoffs])
        for (lease, to), asked in zip(plan.handoffs, asks, strict=True):
            if asked:
                deliveries.setdefault(to, []).append(lease.key)
                if lease.owner is not None:
                    owners.add(lease.owner)
        for to, keys in deliveries.items():
            await w.deliver(to, keys)
        # Owners asked to hand over watch for the receiver's ack (see BoardCoordinator).
        for owner in sorted(owners):
            await w.notify(owner)

    async def _give(self, lease: Lease, to: str) -> Lease | None:
        """Make ``to`` the owner of a free lease (or take it, if ``to`` is the leader)."""
        w = self.worker
        for attempt in range(2):
            if to == w.worker_id:
                before = len(w.held)
                await w.take_given(lease)
                got = w.held.get(lease.key)
                if got is not None and len(w.held) > before:
                    self.view[lease.key] = got.lease
                    return got.lease
            else:
                try:
                    given = await w.store.take(lease, to)
                except LeaseLostError:
                    given = None
                if given is not None:
                    self.view[lease.key] = given
                    self.given[lease.key] = (given, w.clock())
                    self._log.info(
                        "lease given", shard_id=lease.key, to=to, previous_owner=lease.owner
                    )
                    return given
            fresh = await self._reread_lease(lease.key)
            if fresh is None or attempt or fresh.owner != lease.owner:
                return None
            lease = fresh
        return None

    async def _ask(self, lease: Lease, to: str) -> bool:
        """Ask a lease's owner to hand it to ``to`` (replacing a request to a worker
        that is gone, as the view shows it). Refused only when the owner changed or a
        request someone else made meanwhile stands (the owner's own, when it leaves):
        the lease is read again and the next pass plans with it."""
        w = self.worker
        if not await w.store.request_handoff(lease, to, replacing=lease.handoff_to):
            await self._reread_lease(lease.key)
            return False
        self.view[lease.key] = lease.evolve(handoff_to=to, handoff_ack=None)
        self.asked[lease.key] = w.clock()
        if w.metrics is not None:
            w.metrics.leases_stolen.inc()
        self._log.info("lease hand-off requested", shard_id=lease.key, owner=lease.owner, to=to)
        return True

    async def _check_asked(self, now: float) -> None:
        """Read again a lease whose hand-off this leader asked and its view still shows
        pending after the receiver's wait (twice the failover time): the plan counts a
        pending move as made, so a request that vanished unseen (refused, withdrawn,
        dropped) would hold the balance until the next sweep. One that still stands
        unacknowledged is delivered again (:meth:`_ask_again`)."""
        for key, at in sorted(self.asked.items()):
            lease = self.view.get(key)
            if lease is None or lease.handoff_to is None:
                del self.asked[key]
            elif now - at >= 2 * self.worker.failover:
                del self.asked[key]
                await self._ask_again(await self._reread_lease(key))

    async def _ask_again(self, lease: Lease | None) -> None:
        """A request still unacknowledged after the receiver's wait: the receiver never
        saw it. Its process was replaced (paused past the failover time, fenced, joined
        again under its id with an empty incoming list) or the delivery was lost; the
        request would stand for ever, counted by the plan as a move made. Deliver it
        again (a request to a worker that is gone is replaced by the plan instead)."""
        if lease is None or lease.handoff_to is None or lease.handoff_ack == lease.handoff_to:
            return
        receiver = self.worker.board.slots.get(lease.handoff_to)
        if receiver is None or receiver.leaving or receiver.fenced:
            return
        self.asked[lease.key] = self.worker.clock()
        self._log.info("lease hand-off delivered again", shard_id=lease.key, to=lease.handoff_to)
        await self.worker.deliver(lease.handoff_to, [lease.key])

    async def take_back(self, board: Board) -> None:
        """Release leases this worker gave that their receivers never took, if the
        receiver is leaving or off the board; forget gives older than
        :data:`KEEP_GIVEN_SECONDS` (a receiver that did not leave meanwhile reads its
        leases at its next beat)."""
        w = self.worker
        now = w.clock()
        for key, (lease, at) in sorted(self.given.items()):
            receiver = board.slots.get(lease.owner or "")
            if receiver is not None and not receiver.leaving:
                if now - at > KEEP_GIVEN_SECONDS:
                    del self.given[key]
                continue
            del self.given[key]
            try:
                await w.store.release(lease)
            except LeaseLostError:
                continue  # taken, passed on or moved since: not this worker's to undo
            self.view[key] = lease.evolve(owner=None, counter=lease.counter + 1)
            self._log.info(
                "lease taken back",
                shard_id=key,
                receiver=lease.owner,
                why="its receiver left before taking it",
            )

    async def before_leaving(self) -> None:
        """This worker's last look at what it gave, on a fresh board: by now a receiver
        stopped together with it has flagged its slot (see :meth:`take_back`). Waits
        for a pass in flight; no pass runs after it."""
        async with self._passing:
            self._retired = True
        if not self.given:
            return
        try:
            await self.take_back(await self.worker.board_store.read_board())
        except Exception as exc:  # the receivers' slots expire in the failover time
            self._log.warning("could not take back leases given to leavers", error=repr(exc))

    async def _reread_lease(self, key: str) -> Lease | None:
        """One lease read again (strongly), into the view; None if it is gone."""
        fresh = await self.worker.store.get_lease(key)
        if fresh is None:
            self.view.pop(key, None)
        else:
            self.view[key] = fresh
        return fresh

    async def _remove_dead_slots(self, board: Board) -> None:
        w = self.worker
        named = {lease.owner for lease in self.view.values()}
        for worker, slot in board.slots.items():
            if slot.fenced and worker not in named:
                await w.board_store.remove_slot(worker)


KEEP_GIVEN_SECONDS = 60.0
"""How long the leader remembers a lease it gave, in case its receiver leaves."""

CONCURRENT_WRITES = 32
"""The leader's lease writes in flight at once (a cold start gives every lease)."""

T = TypeVar("T")


async def batched(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Await the calls, at most :data:`CONCURRENT_WRITES` at a time, in order."""
    results: list[T] = []
    for start in range(0, len(calls), CONCURRENT_WRITES):
        results.extend(await asyncio.gather(*calls[start : start + CONCURRENT_WRITES]))
    return results


def _fenced(board: Board, worker: str) -> Board:
    slots = dict(board.slots)
    slots[worker] = replace(slots[worker], fenced=True)
    return replace(board, slots=slots)
