"""Board coordination: each worker's item in the workers table, one leader, and the
pure decisions they take.

Scanning every lease to judge expiry costs every worker a read of the whole table per
scan, so the table's read cost grows with workers x shards (the scan coordination of
earlier releases; docs/benchmarks.md, scale). Renewing every lease, as KCL does, costs a
write per lease every few seconds. Here each worker instead keeps a *slot*: a small
item of its own in the workers table (the lease table's name plus ``-workers``), with a
heartbeat counter it bumps with a conditional write that returns the item. A beat costs
one write unit whatever the size of the fleet, and no item grows with it.

- **The leader** holds the leader item, a lease of its own in the same table: its
  counter moves every second while it leads. The leader Scans the workers table every
  second (eventually consistent: a few hundred bytes a worker, packed into 4 KB read
  units), so it watches every worker's counter, lists the shards and creates leases
  (no other worker does), reads the leases with an eventually consistent Scan every
  sweep interval, gives free and orphaned leases to workers, and asks for hand-offs to
  balance.
- **Expiry** is the KCL rule applied to slots: a slot whose counter stands still for
  the failover time on the observer's monotonic clock is expired. The leader *fences*
  it (a conditional write on the counter it watched, so a worker that beat meanwhile
  is never fenced); a fenced slot can never beat again, and only then are its leases
  given to others.
- **The deputy**, named by the leader in the leader item (the live worker that joined
  first after it), reads the leader item every second and takes it over, with a write
  conditioned on the counter it watched, once that counter stood still for the failover
  time. Every other worker reads the leader item every :data:`WATCH_SECONDS` (every
  second while it names no deputy) and does the same, for when the leader and its
  deputy die together.
- **Acting window**: a worker acts on its leases only within ``stale_after`` (less than
  the failover time) of the start of its last successful beat, and leads only within
  as long of its last successful write of the leader item, so by the time anyone can
  fence it or take the lead, it has stopped; the lease writes stay fenced by counter
  and owner.
- **Incoming**: a lease given or handed to a worker is appended to its slot's
  ``incoming`` list; the worker reads it from its next beat. **Notices**: a counter in
  the slot others bump to have the worker read its own leases again (a hand-off asked
  of it, a repair after a sweep).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Literal

from consumer.leases.decisions import Seen, is_expired
from consumer.leases.model import Lease

LEAD_SECONDS = 1.0
"""How often the leader renews the leader item and plans, and the deputy watches it."""

LEAVING_BEAT_SECONDS = 0.2
"""How often a leaving worker beats, to see acknowledgements of its hand-offs soon."""

WATCH_SECONDS = 30.0
"""How often a worker that is neither leader nor deputy reads the leader item."""

BOARD_KEY = "lander-board"
"""The single board item of the release before per-worker slots, in the lease table:
left alone (a reserved key) and safe to delete."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One worker's place on the board."""

    counter: int
    """The heartbeat counter: +1 on every beat."""
    joined: int
    """When the worker joined (wall-clock ms): the order of the line, in which the
    leader picks its deputy."""
    fenced: bool = False
    """Set by the leader once the counter stood still for the failover time."""
    notices: int = 0
    """Bumped by others to ask the worker to read its leases again."""
    held: int = 0
    """Leases the worker held at its last beat (for the planner and people)."""
    leaving: bool = False
    """The worker is stopping, or cannot land: its leases are to be handed to others."""
    unfit: bool = False
    """Leaving because it cannot do its work (its archive probe fails), not stopping:
    ``lander status`` says which (written by releases from issue 46 on)."""
    incoming: tuple[str, ...] = ()
    """Lease keys given or handed to the worker that it has not read yet."""
    beat_ms: int | None = None
    """Wall-clock time (epoch ms) of the last beat, for ``lander status`` only: expiry
    never reads it (the leader watches counters on its own monotonic clock)."""
    cpu: float = 0.0
    """The worker process's CPU use between its last two beats, in percent of one core
    (for people and alerts; the plan balances the shards' measured throughput)."""
    instance: str | None = None
    """A token the process draws at start: the slot is also the process's claim on
    its worker id (:func:`claim_slot`). None on slots written before it existed."""
    address: str | None = None
    """``host:port`` of the worker's metrics server, where others wake it
    (:mod:`.wake`); None when it serves none."""


@dataclass(frozen=True, slots=True)
class Leadership:
    """The leader item: who leads, its counter, and who watches it."""

    leader: str
    counter: int
    """+1 on every renewal by the leader; a taker conditions on the one it watched."""
    deputy: str | None = None
    """The worker the leader named to watch it every second and take over."""
    address: str | None = None
    """``host:port`` where the leader is woken (:mod:`.wake`)."""


@dataclass(frozen=True, slots=True)
class Board:
    """The workers table as read: every worker's slot, and the leader item."""

    slots: Mapping[str, Slot] = field(default_factory=dict)
    leadership: Leadership | None = None


LeadDecision = Literal["lead", "claim", "wait"]


def lead_decision(
    leadership: Leadership | None, worker: str, seen: Seen | None, now: float, failover: float
) -> LeadDecision:
    """What ``worker`` does with the leader item it just read; ``seen`` is the item's
    counter as this worker first saw it, on its monotonic clock.

    - No item (a new fleet, or the last leader left): ``claim`` it (a create that only
      one worker wins).
    - Its own: ``lead``.
    - Another's whose counter stood still here for the failover time: ``claim`` it (a
      write conditioned on that counter: only one taker wins, and never over a leader
      that renewed meanwhile). Otherwise ``wait``.
    """
    if leadership is None:
        return "claim"
    if leadership.leader == worker:
        return "lead"
    if seen is None or seen.counter != leadership.counter:
        return "wait"
    return "claim" if now - seen.since >= failover else "wait"


def deputy_for(order: list[str], board: Board, leader: str) -> str | None:
    """The leader's deputy: the first live worker in the line after it, not leaving."""
    return next(
        (w for w in order if w != leader and w in board.slots and not board.slots[w].leaving),
        None,
    )


ClaimDecision = Literal["join", "wait", "duplicate"]


def claim_slot(
    slot: Slot | None, instance: str, first: Seen | None, now: float, failover: float
) -> ClaimDecision:
    """Whether a process may take its worker id's slot: one live process per worker id.

    Two processes under one worker id would each take the other's leases as their own,
    so the slot doubles as the claim on the id (:mod:`consumer.leases.identity`).
    ``first`` is the slot's counter as this process first saw it while waiting, on its
    monotonic clock.

    - No slot, a fenced one, or one this process wrote: ``join`` at once.
    - Another process's slot: ``wait`` and watch its counter; ``duplicate`` once it
      moves (that process lives: refuse to start), ``join`` once it stood still for
      the failover time (that process died; the leader may not have fenced it yet).
    """
    if slot is None or slot.fenced or slot.instance == instance:
        return "join"
    if first is None:
        return "wait"
    if slot.counter != first.counter:
        return "duplicate"
    return "join" if now - first.since >= failover else "wait"


def watch(seen: Mapping[str, Seen], board: Board, now: float) -> dict[str, Seen]:
    """Fold a board read into what this worker has seen of each slot's counter."""
    observed: dict[str, Seen] = {}
    for worker, slot in board.slots.items():
        previous = seen.get(worker)
        if previous is not None and previous.counter == slot.counter:
            observed[worker] = previous
        else:
            observed[worker] = Seen(slot.counter, now)
    return observed


def slot_expired(
    worker: str, board: Board, seen: Mapping[str, Seen], now: float, failover: float
) -> bool:
    """True if the worker's counter has stood still for ``failover`` seconds here."""
    slot = board.slots.get(worker)
    record = seen.get(worker)
    if slot is None or record is None or record.counter != slot.counter:
        return False
    return now - record.since >= failover


def line(board: Board, seen: Mapping[str, Seen], now: float, failover: float) -> list[str]:
    """The live workers in join order: not fenced, not expired here."""
    alive = [
        (slot.joined, worker)
        for worker, slot in board.slots.items()
        if not slot.fenced and not slot_expired(worker, board, seen, now, failover)
    ]
    return [worker for _, worker in sorted(alive)]


def to_fence(board: Board, seen: Mapping[str, Seen], now: float, failover: float) -> list[str]:
    """Workers whose slots the leader fences now: unfenced, counter still for failover."""
    return sorted(
        worker
        for worker, slot in board.slots.items()
        if not slot.fenced and slot_expired(worker, board, seen, now, failover)
    )


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the leader decided in one planning pass."""

    give: tuple[tuple[Lease, str], ...] = ()
    """Free or orphaned leases, each with the live worker it goes to."""
    handoffs: tuple[tuple[Lease, str], ...] = ()
    """Leases whose live owners are asked to hand them over, with the receiver."""


def free_lease(
    lease: Lease,
    board: Board,
    lease_seen: Mapping[str, Seen],
    now: float,
    failover: float,
) -> bool:
    """Whether nobody may be acting on the lease, so the leader may give it away.

    Unowned; or owned by a fenced slot; or owned by a worker with no slot on the board
    (a KCL worker of an adopted table, a lander before board coordination) whose lease
    counter stood still for the failover time across the leader's reads. A worker on
    the board, alive or not yet fenced, keeps its leases.
    """
    if lease.owner is None:
        return True
    slot = board.slots.get(lease.owner)
    if slot is not None:
        return slot.fenced
    return is_expired(lease, lease_seen, now, failover)


def weights(leases: Iterable[Lease]) -> dict[str, float]:
    """Each lease's weight in average leases (the weights sum to the number of leases):
    half its count, half its share of the measured throughput (KB/s). With no load
    measured, every lease weighs 1 and balance is by count."""
    leases = list(leases)
    total = sum(_kbps(lease) for lease in leases)
    if total <= 0:
        return {lease.key: 1.0 for lease in leases}
    n = len(leases)
    return {lease.key: 0.5 + 0.5 * n * _kbps(lease) / total for lease in leases}


def _kbps(lease: Lease) -> float:
    return max(0.0, lease.load.kb_per_second) if lease.load is not None else 0.0


EPSILON = 1e-9
MARGIN = 0.5
"""A move must narrow the gap between giver and receiver by more than this many
average leases: by count, a lease moves from a worker with two more, never one more;
since every lease weighs at least half an average one, gaps under 0.75 never move."""


def plan_assignment(
    leases: Iterable[Lease],
    board: Board,
    live: Iterable[str],
    *,
    ready: Set[str],
    lease_seen: Mapping[str, Seen],
    now: float,
    failover: float,
    rng: random.Random,
) -> Assignment:
    """Give free ready leases to the lightest workers, then balance by load.

    Receivers are the live workers that are not leaving. A worker's load is the sum of
    its leases' :func:`weights` (by count when no throughput is measured). A lease
    being handed over counts for its receiver (the ``incoming`` lists repeat what the
    leases say, so they are not counted). Free leases go heaviest first, each to the
    lightest receiver; a leaving worker's leases all move. Then, several per pass, a
    lease moves from the heaviest worker that has a fitting one to the lightest, only
    if the move narrows their difference by more than :data:`MARGIN` average leases:
    each move lowers the sum of squared loads, so the plan ends, and a plan over its
    own result moves nothing (no oscillation; small wobbles of throughput move nothing
    either). By count, that is: move while the giver holds two more than the receiver.
    """
    receivers = [w for w in live if not board.slots[w].leaving]
    workable = [lease for lease in leases if lease.key in ready]
    if not receivers or not workable:
        return Assignment()
    weight = weights(workable)
    load: dict[str, float] = dict.fromkeys(receivers, 0.0)
    movable: dict[str, list[Lease]] = {}
    leaving: list[Lease] = []
    free: list[Lease] = []
    for lease in workable:
        if free_lease(lease, board, lease_seen, now, failover):
            free.append(lease)
            continue
        assert lease.owner is not None
        if lease.handoff_to is not None and lease.handoff_to in load:
            load[lease.handoff_to] += weight[lease.key]
            continue
        # A hand-off to a worker that is gone or leaving is asked again of another.
        if lease.owner in load:
            load[lease.owner] += weight[lease.key]
            movable.setdefault(lease.owner, []).append(lease)
        elif lease.owner in board.slots and board.slots[lease.owner].leaving:
            leaving.append(lease)

    def lightest() -> str:
        least = min(load.values())
        return rng.choice(sorted(w for w, n in load.items() if n <= least + EPSILON))

    rng.shuffle(free)
    rng.shuffle(leaving)
    # A lease placed by this plan stays movable where it was placed: the balancing
    # moves see the loads the plan leads to, so a plan over its own result moves
    # nothing. A lease moved twice goes straight to its last receiver.
    give: dict[str, tuple[Lease, str]] = {}
    handoffs: dict[str, tuple[Lease, str]] = {}

    def place(lease: Lease, receiver: str, plan: dict[str, tuple[Lease, str]]) -> None:
        plan[lease.key] = (lease, receiver)
        load[receiver] += weight[lease.key]
        movable.setdefault(receiver, []).append(lease)

    for lease in sorted(free, key=lambda lease: -weight[lease.key]):
        place(lease, lightest(), give)
    for lease in sorted(leaving, key=lambda lease: -weight[lease.key]):
        place(lease, lightest(), handoffs)
    while (move := _best_move(load, movable, weight, lightest(), rng)) is not None:
        giver, lease, receiver = move
        movable[giver].remove(lease)
        load[giver] -= weight[lease.key]
        plan = give if lease.key in give else handoffs
        place(lease, receiver, plan)
        if plan is handoffs and receiver == lease.owner:  # back where it is: no hand-off
            del handoffs[lease.key]
    return Assignment(give=tuple(give.values()), handoffs=tuple(handoffs.values()))


def _best_move(
    load: Mapping[str, float],
    movable: Mapping[str, list[Lease]],
    weight: Mapping[str, float],
    receiver: str,
    rng: random.Random,
) -> tuple[str, Lease, str] | None:
    """The lease whose move to ``receiver`` narrows the gap most, from the heaviest
    giver that has one; None when no move narrows a gap by more than
    :data:`MARGIN` average leases."""
    givers = sorted((w for w in movable if movable[w] and w != receiver), key=lambda w: -load[w])
    for giver in givers:
        gap = load[giver] - load[receiver]
        if gap <= MARGIN:
            return None
        fits = [
            (abs(gap - 2 * weight[lease.key]), lease)
            for lease in movable[giver]
            if abs(gap - 2 * weight[lease.key]) < gap - MARGIN - EPSILON
        ]
        if fits:
            best = min(score for score, _ in fits)
            lease = rng.choice([lease for score, lease in fits if score <= best + EPSILON])
            return giver, lease, receiver
    return None
