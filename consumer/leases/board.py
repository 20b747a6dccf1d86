"""The board: one lease-table item that shows which workers are alive, and the pure
decisions of board coordination (``LANDER_COORDINATION=board``).

Scanning every lease to judge expiry costs every worker a read of the whole table per
scan, so the table's read cost grows with workers x shards (docs/benchmarks.md,
scale). On the board each worker instead has a *slot* in one item, keyed
``lander-board``: a heartbeat counter it bumps with a conditional write that returns
the whole item, so every worker watches every other worker's counter at the cost of
its own write, and nobody scans to judge liveness.

- **Expiry** is the KCL rule applied to slots: a slot whose counter stands still for
  the failover time on the observer's monotonic clock is expired. The worker that
  leads *fences* it (a conditional write on the counter it watched, so a worker that
  beat meanwhile is never fenced); a fenced slot can never beat again, and only then
  are its leases given to others.
- **Acting window**: a worker acts on its leases only within ``stale_after`` (less than
  the failover time) of the start of its last successful beat, so by the time anyone
  can fence it, it has stopped; the lease writes stay fenced by counter and owner.
- **Leader**: the live slot that joined first, as each worker sees the board. It lists
  the shards and creates leases (no other worker does), reads the leases with an
  eventually consistent Scan every sweep interval, gives free and orphaned leases to
  workers, and asks for hand-offs to balance. Two workers that both believe they lead
  for a moment (a leader paused and not yet fenced) only race conditional writes.
  The leader and the next in line (the deputy) beat every second, so a dead owner or
  a dead leader is found within failover + 1 s.
- **Incoming**: a lease given or handed to a worker is appended to its slot's
  ``incoming`` list; the worker reads it from its next beat. **Notices**: a counter in
  the slot others bump to have the worker read its own leases again (a hand-off asked
  of it, a repair after a sweep).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from consumer.leases.decisions import Seen, is_expired
from consumer.leases.model import Lease

BOARD_KEY = "lander-board"
"""The board's key in the lease table (shard ids never start with ``lander-``)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One worker's place on the board."""

    counter: int
    """The heartbeat counter: +1 on every beat."""
    joined: int
    """Join order (the board's join count when it joined): the lowest live slot leads."""
    fenced: bool = False
    """Set by the leader once the counter stood still for the failover time."""
    notices: int = 0
    """Bumped by others to ask the worker to read its leases again."""
    held: int = 0
    """Leases the worker held at its last beat (for the planner and people)."""
    leaving: bool = False
    """The worker is stopping: its leases are to be handed to others."""
    incoming: tuple[str, ...] = ()
    """Lease keys given or handed to the worker that it has not read yet."""


@dataclass(frozen=True, slots=True)
class Board:
    """A snapshot of the board item."""

    slots: Mapping[str, Slot] = field(default_factory=dict)
    joins: int = 0
    """How many joins the board has seen: the next slot's ``joined``."""


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
    """The live workers in join order (leader first): not fenced, not expired here."""
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
    target: int = 0


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
    """Give free ready leases to the workers with the fewest, then balance by count.

    Receivers are the live workers that are not leaving. The target is ceil(ready
    leases / receivers). A lease being handed over counts for its receiver (the
    ``incoming`` lists repeat what the leases say, so they are not counted). Moves go
    from the worker with the most to the one with the fewest, each only while the giver
    has at least two more than the receiver (so nothing oscillates), several per pass;
    a leaving worker's leases all move.
    """
    receivers = [w for w in live if not board.slots[w].leaving]
    workable = [lease for lease in leases if lease.key in ready]
    if not receivers or not workable:
        return Assignment()
    target = math.ceil(len(workable) / len(receivers))
    load: Counter[str] = Counter(dict.fromkeys(receivers, 0))
    movable: dict[str, list[Lease]] = {}
    leaving: list[Lease] = []
    free: list[Lease] = []
    for lease in workable:
        if free_lease(lease, board, lease_seen, now, failover):
            free.append(lease)
            continue
        assert lease.owner is not None
        if lease.handoff_to is not None and lease.handoff_to in load:
            load[lease.handoff_to] += 1
            continue
        # A hand-off to a worker that is gone or leaving is asked again of another.
        if lease.owner in load:
            load[lease.owner] += 1
            movable.setdefault(lease.owner, []).append(lease)
        elif lease.owner in board.slots and board.slots[lease.owner].leaving:
            leaving.append(lease)

    def fewest() -> str:
        least = min(load.values())
        return rng.choice(sorted(w for w, n in load.items() if n == least))

    rng.shuffle(free)
    give: list[tuple[Lease, str]] = []
    for lease in free:
        receiver = fewest()
        give.append((lease, receiver))
        load[receiver] += 1
    handoffs: list[tuple[Lease, str]] = []
    for lease in leaving:
        receiver = fewest()
        handoffs.append((lease, receiver))
        load[receiver] += 1
    while True:
        givers = {w: n for w, n in load.items() if movable.get(w)}
        if not givers:
            break
        most = max(givers.values())
        receiver = fewest()
        if most - load[receiver] < 2:
            break
        giver = rng.choice(sorted(w for w, n in givers.items() if n == most))
        candidates = movable[giver]
        handoffs.append((candidates.pop(rng.randrange(len(candidates))), receiver))
        load[giver] -= 1
        load[receiver] += 1
    return Assignment(give=tuple(give), handoffs=tuple(handoffs), target=target)
