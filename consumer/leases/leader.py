"""The leader's duties under board coordination (:mod:`.board`).

The leader is the worker that holds the leader item (:mod:`.succession`). Every second
it reads the workers table (one eventually consistent Scan), fences slots whose
counters stood still for the failover time (a conditional write on the counter it
watched), reads again the leases of fenced and leaving workers (the owner index, then
each item strongly), reads every lease with an eventually consistent Scan every sweep
interval (or when told something changed), gives free ready leases and asks for
hand-offs as :func:`.board.plan_assignment` decides, and removes fenced slots nothing
names. Its writes are conditional like every other, so a second worker that believes
it leads for a moment (a leader paused and not yet fenced) only loses races.

A lease given to a worker whose leaving flag the leader had not seen yet may reach it
after its last look at its leases: when the whole fleet stops at once, it would stay
owned after every worker exited. So the leader releases, each pass and once more
before it leaves, a lease still exactly as given (the receiver never took it) whose
receiver is leaving or gone (:meth:`Leader.take_back`), conditionally: never a take.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from consumer.aio import batched
from consumer.leases.board import LEAD_SECONDS, Board, plan_assignment
from consumer.leases.decisions import Seen, observe
from consumer.leases.member import Member
from consumer.leases.model import Lease, LeaseError, LeaseLostError
from consumer.leases.roster import Roster
from consumer.leases.store import CoordinatedStore
from consumer.leases.wake import Courier

if TYPE_CHECKING:
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.leases")


class Leader:
    """What a worker does while it leads; state that only the leader keeps."""

    def __init__(
        self,
        member: Member,
        store: CoordinatedStore,
        roster: Roster,
        courier: Courier,
        worker_id: str,
        *,
        failover: float,
        sweep_seconds: float,
        clock: Callable[[], float],
        rng: random.Random,
        metrics: LanderMetrics | None = None,
    ) -> None:
        self._member = member
        self._store = store
        self._roster = roster
        self._courier = courier
        self._me = worker_id
        self._failover = failover
        self._sweep_seconds = sweep_seconds
        self._clock = clock
        self._rng = rng
        self._metrics = metrics
        self._log = log.bind(worker_id=worker_id)
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
        self._deputy_scan_at = self._probe_at = 0.0
        self.asked: dict[str, float] = {}
        """When this leader asked each hand-off still pending in its view."""

    async def lead_pass(self) -> None:
        """The leader's duties, if this worker leads and is inside its acting window."""
        async with self._passing:
            if not self._retired:
                await self._lead_pass()

    async def _lead_pass(self) -> None:
        if not self._member.is_leader():
            if self._leading:
                self._log.info("no longer leading")
            self._leading = False
            self.view = {}
            self._swept_at = None
            await self._watch_as_deputy()
            return
        board = await self._roster.read()
        await self._probe_table(self._clock())
        if not self._leading:
            self._log.info("leading", workers=len(board.slots))
            self._leading = True
            self._sweep_wanted = True
        notices = self._member.notices()
        if notices is not None and self._lead_notices != notices:
            self._lead_notices = notices
            self._sweep_wanted = True
        now = self._clock()
        for worker in self._roster.to_fence():
            if worker == self._me:
                continue
            if await self._store.fence(worker, board.slots[worker].counter):
                self._log.warning("worker fenced: its heartbeat stood still", fenced=worker)
                self._roster.mark_fenced(worker)
                self._refresh.add(worker)
        board = self._roster.board
        for worker, slot in board.slots.items():
            if slot.leaving and worker not in self._refresh:
                self._refresh.add(worker)
        due = self._swept_at is None or now - self._swept_at >= self._sweep_seconds
        if due or self._sweep_wanted:
            await self.sweep()
        for worker in sorted(self._refresh):
            await self._reread(worker)
        self._refresh = {n for n, slot in board.slots.items() if slot.leaving} - {self._me}
        astray = self._astray(board) if due else []
        await self._check_asked(now)
        await self.take_back(board)
        await self._assign(board)
        if due:
            for worker in astray:  # a lost delivery: have it read its leases again
                if worker == self._me:
                    await self._member.read_own_leases()
                else:
                    await self._courier.notify(worker)
            await self._remove_dead_slots(board)

    async def _watch_as_deputy(self) -> None:
        """The deputy reads the workers table every :data:`DEPUTY_SCAN_SECONDS`: when it
        takes the lead it has watched every slot already, so a worker that died with
        the leader is fenced at its own failover time, not a failover time later."""
        now = self._clock()
        if self._member.is_deputy() and now >= self._deputy_scan_at:
            self._deputy_scan_at = now + DEPUTY_SCAN_SECONDS
            await self._roster.read()

    async def _probe_table(self, now: float) -> None:
        """Read one reserved key of the lease table every failover time: a table deleted
        under the fleet raises TableMissingError here (the worker's loop has it created
        again, :meth:`BoardCoordinator.table_gone`), not only at the next checkpoint."""
        if now >= self._probe_at:
            self._probe_at = now + self._failover
            await self._store.get_lease(PROBE_KEY)

    async def table_gone(self) -> None:
        """The lease table was deleted (or emptied) under the fleet: every lease is gone.
        Sweep again, and have every worker read its own leases, so each drops what it
        held before the new leases are given."""
        self.want_sweep()
        for worker in sorted(set(self._roster.board.slots) - {self._me}):
            with contextlib.suppress(LeaseError):
                await self._courier.notify(worker)

    async def sweep(self) -> None:
        """Read every lease, eventually consistent: the leader's view."""
        leases = await self._member.read_table(consistent=False)
        if self.view and not leases:  # deleted and created again, or emptied
            await self._member.table_gone()
        self.view = {lease.key: lease for lease in leases}
        self._view_seen = observe(self._view_seen, leases, self._clock())
        self._swept_at = self._clock()
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
        """Seconds to the next pass: a second, or, for the leader, sooner when a slot it
        watches would expire (so a dead worker is fenced at failover, not up to a
        second later). A worker that cannot beat sees every slot stand still on its old
        board: it must not pass every 10 ms."""
        if not self._member.is_leader():
            return LEAD_SECONDS
        due = self._roster.next_expiry(self._me)
        if due is None:
            return LEAD_SECONDS
        return min(LEAD_SECONDS, max(0.05, due - self._clock() + 0.01))

    def current_view(self) -> list[Lease] | None:
        """The leases as this leader knows them, if it leads and has swept."""
        return list(self.view.values()) if self._leading and self._swept_at is not None else None

    def want_sweep(self) -> None:
        """Have the next pass read the leases again."""
        self._sweep_wanted = True

    async def _reread(self, worker: str) -> None:
        """Read strongly, several at a time, every lease naming ``worker``: as the owner
        index finds them, and as the view has them."""
        keys = set(await self._store.owned_by(worker))
        keys |= {key for key, lease in self.view.items() if lease.owner == worker}
        ordered = sorted(keys)
        for key, fresh in zip(
            ordered, await batched([self._store.get_lease(key) for key in ordered]), strict=True
        ):
            if fresh is None:
                self.view.pop(key, None)
            else:
                self.view[key] = fresh

    async def _assign(self, board: Board) -> None:
        plan = plan_assignment(
            self.view.values(),
            board,
            self._roster.line(),
            ready=self._member.ready(self.view.values()),
            lease_seen=self._view_seen,
            now=self._clock(),
            failover=self._failover,
            rng=self._rng,
        )
        deliveries: dict[str, list[str]] = {}
        gives = await batched([self._give(lease, to) for lease, to in plan.give])
        for (_, to), given in zip(plan.give, gives, strict=True):
            if given is not None and to != self._me:
                deliveries.setdefault(to, []).append(given.key)
        asks = await batched([self._ask(lease, to) for lease, to in plan.handoffs])
        for (lease, to), asked in zip(plan.handoffs, asks, strict=True):
            if asked:
                deliveries.setdefault(to, []).append(lease.key)
                # The owner gets the key too, and watches that lease for the receiver's
                # ack (BoardCoordinator): it reads that one lease, not all of its own.
                if lease.owner is not None:
                    deliveries.setdefault(lease.owner, []).append(lease.key)
        for to, keys in deliveries.items():
            await self._courier.deliver(to, keys)

    async def _give(self, lease: Lease, to: str) -> Lease | None:
        """Make ``to`` the owner of a free lease (or take it, if ``to`` is the leader)."""
        for attempt in range(2):
            if to == self._me:
                taken = await self._member.take_given(lease)
                if taken is not None:
                    self.view[lease.key] = taken
                    return taken
            else:
                try:
                    given = await self._store.take(lease, to)
                except LeaseLostError:
                    given = None
                if given is not None:
                    self.view[lease.key] = given
                    self.given[lease.key] = (given, self._clock())
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
        if not await self._store.request_handoff(lease, to, replacing=lease.handoff_to):
            await self._reread_lease(lease.key)
            return False
        self.view[lease.key] = lease.evolve(handoff_to=to, handoff_ack=None)
        self.asked[lease.key] = self._clock()
        if self._metrics is not None:
            self._metrics.leases_stolen.inc()
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
            elif now - at >= 2 * self._failover:
                del self.asked[key]
                await self._ask_again(await self._reread_lease(key))

    async def _ask_again(self, lease: Lease | None) -> None:
        """A request still unacknowledged after the receiver's wait: the receiver never
        saw it. Its process was replaced (paused past the failover time, fenced, joined
        again under its id with an empty incoming list) or the delivery was lost; the
        request would stand for ever, counted by the plan as a move made. Deliver it
        again; to a receiver not on the board (fenced, not joined again yet), look again
        later (the plan replaces a request to a worker that stays gone)."""
        if lease is None or lease.handoff_to is None or lease.handoff_ack == lease.handoff_to:
            return
        self.asked[lease.key] = self._clock()
        receiver = self._roster.board.slots.get(lease.handoff_to)
        if receiver is None or receiver.leaving or receiver.fenced:
            return
        self._log.info("lease hand-off delivered again", shard_id=lease.key, to=lease.handoff_to)
        await self._courier.deliver(lease.handoff_to, [lease.key])

    async def take_back(self, board: Board) -> None:
        """Release leases this worker gave that their receivers never took, if the
        receiver is leaving or off the board; forget gives older than
        :data:`KEEP_GIVEN_SECONDS` (a receiver that did not leave meanwhile reads its
        leases at its next beat)."""
        now = self._clock()
        for key, (lease, at) in sorted(self.given.items()):
            receiver = board.slots.get(lease.owner or "")
            if receiver is not None and not receiver.leaving:
                if now - at > KEEP_GIVEN_SECONDS:
                    del self.given[key]
                continue
            del self.given[key]
            try:
                await self._store.release(lease)
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
            await self.take_back(await self._roster.read())
        except Exception as exc:  # the receivers' slots expire in the failover time
            self._log.warning("could not take back leases given to leavers", error=repr(exc))

    async def _reread_lease(self, key: str) -> Lease | None:
        """One lease read again (strongly), into the view; None if it is gone."""
        fresh = await self._store.get_lease(key)
        if fresh is None:
            self.view.pop(key, None)
        else:
            self.view[key] = fresh
        return fresh

    async def _remove_dead_slots(self, board: Board) -> None:
        named = {lease.owner for lease in self.view.values()}
        for worker, slot in board.slots.items():
            if slot.fenced and worker not in named:
                await self._store.remove_slot(worker)


PROBE_KEY = "lander-probe"
"""A reserved key of the lease table the leader reads to see that the table exists."""

DEPUTY_SCAN_SECONDS = 2.0
"""How often the deputy reads the workers table (the leader: every second)."""

KEEP_GIVEN_SECONDS = 60.0
"""How long the leader remembers a lease it gave, in case its receiver leaves."""
