"""Pure lease decisions: expiry, readiness after resharding, what to take or steal.

Nothing here does I/O or reads a clock; the caller passes ``now`` (its own monotonic
clock) and a random generator, so every decision can be replayed and property-tested.

Expiry is judged the KCL way. A worker never compares timestamps written by another
machine: it remembers, per lease, the counter it last saw and when (on its own
monotonic clock) it first saw that value. A lease whose counter has not moved for
``failover`` seconds is expired. The owner renews (counter + 1) every ``failover / 3``
seconds, so a live owner's lease never looks expired, and clock skew between machines
cannot expire a lease early.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

from consumer.leases.model import Lease


@dataclass(frozen=True, slots=True)
class Seen:
    """One worker's memory of a lease: the counter value and when it was first seen."""

    counter: int
    since: float


def observe(seen: Mapping[str, Seen], leases: Iterable[Lease], now: float) -> dict[str, Seen]:
    """Fold a fresh scan of the table into what this worker has seen.

    A counter that moved restarts the lease's clock; leases gone from the table are
    forgotten.
    """
    observed: dict[str, Seen] = {}
    for lease in leases:
        previous = seen.get(lease.key)
        if previous is not None and previous.counter == lease.counter:
            observed[lease.key] = previous
        else:
            observed[lease.key] = Seen(lease.counter, now)
    return observed


def is_expired(lease: Lease, seen: Mapping[str, Seen], now: float, failover: float) -> bool:
    """True if the lease's counter has stood still for ``failover`` seconds here."""
    record = seen.get(lease.key)
    if record is None or record.counter != lease.counter:
        return False
    return now - record.since >= failover


def ready_keys(leases: Iterable[Lease], listed_shards: Set[str] | None) -> set[str]:
    """Leases whose shard may be processed now: unfinished, with every parent done.

    A parent is done when its lease is checkpointed at SHARD_END, or when it has no
    lease and the stream no longer lists the shard (trimmed past retention). A parent
    that is still listed but has no lease yet (a table being rebuilt) holds the child
    back: its lease is about to be created and must be read first. Before the first
    successful shard listing (``listed_shards`` is None) no child with parents is
    ready.
    """
    by_key = {lease.key: lease for lease in leases}
    ready: set[str] = set()
    for lease in by_key.values():
        if lease.finished:
            continue
        if all(_parent_done(p, by_key, listed_shards) for p in lease.parents):
            ready.add(lease.key)
    return ready


def _parent_done(parent: str, by_key: Mapping[str, Lease], listed: Set[str] | None) -> bool:
    lease = by_key.get(parent)
    if lease is not None:
        return lease.finished
    return listed is not None and parent not in listed


@dataclass(frozen=True, slots=True)
class Plan:
    """What one lease pass of one worker decided."""

    take: tuple[Lease, ...] = ()
    """Unowned or expired leases (or ones the table says are already ours) to take."""
    handoffs: tuple[Lease, ...] = ()
    """Leases to ask their owners to hand over: the steals of this pass."""
    target: int = 0
    live_workers: int = 1


def plan_acquisitions(
    me: str,
    leases: Iterable[Lease],
    held: Set[str],
    seen: Mapping[str, Seen],
    *,
    now: float,
    failover: float,
    ready: Set[str],
    rng: random.Random,
) -> Plan:
    """Decide which leases this worker takes, and whether it steals one.

    Balance: the target is ceil(ready leases / live workers), where live workers are
    the owners of unexpired ready leases plus this worker. Below target, the worker
    first takes leases that are free (no owner, expired, or already naming it as owner
    after a restart or a hand-off); if that is not enough, it asks for the rest of its
    share, counting hand-offs already coming to it: one lease at a time, each from the
    worker most loaded at that point, and only while that worker holds at least two
    more than this one will, so ownership converges instead of oscillating. A lease
    already being handed to someone counts as gone from its owner, so workers asking
    in the same moment do not all empty one worker. A worker far below its share (one
    just started) thus fills it in one pass, not one lease per pass.

    Workers that start together cannot see each other on their first pass, so the
    first to scan may take more than its share; the worker delays its first pass by a
    random fraction of the scan interval to make that rare, and hand-offs (which lose
    no record and deliver none twice) even it out within a few passes.
    """
    workable = [lease for lease in leases if lease.key in ready]
    if not workable:
        return Plan()

    alive = {
        lease.owner
        for lease in workable
        if lease.owner is not None
        and lease.owner != me
        and not is_expired(lease, seen, now, failover)
    }
    live_workers = len(alive) + 1
    target = math.ceil(len(workable) / live_workers)
    mine = sum(1 for lease in workable if lease.key in held)
    deficit = target - mine
    if deficit <= 0:
        return Plan(target=target, live_workers=live_workers)

    ours = [lease for lease in workable if lease.key not in held and lease.owner == me]
    free = [
        lease
        for lease in workable
        if lease.key not in held
        and lease.owner != me
        and (lease.owner is None or is_expired(lease, seen, now, failover))
    ]
    rng.shuffle(free)
    take = tuple((ours + free)[: max(deficit, len(ours))])

    # Hand-offs asked of live owners and not answered yet (one whose owner expired is
    # taken above, not counted twice).
    coming = sum(
        1
        for lease in workable
        if lease.key not in held and lease.handoff_to == me and lease not in take
    )
    after = mine + len(take) + coming
    handoffs: tuple[Lease, ...] = ()
    if after < target:
        # Only leases their owners are still renewing count as load, or can be asked for.
        live = [
            lease
            for lease in workable
            if lease.owner in alive and not is_expired(lease, seen, now, failover)
        ]
        handoffs = _choose_handoffs(live, after, target - after, rng)
    return Plan(take=take, handoffs=handoffs, target=target, live_workers=live_workers)


def _choose_handoffs(
    live: list[Lease], mine: int, wanted: int, rng: random.Random
) -> tuple[Lease, ...]:
    """Up to ``wanted`` leases to ask for, each from the worker most loaded at its turn,
    while it holds at least two more than this worker will."""
    # A lease already being handed to someone is neither load nor askable.
    askable: dict[str, list[Lease]] = {}
    for lease in live:
        if lease.handoff_to is None and lease.owner is not None:
            askable.setdefault(lease.owner, []).append(lease)
    load = Counter({owner: len(leases) for owner, leases in askable.items()})
    chosen: list[Lease] = []
    while len(chosen) < wanted and load:
        most = max(load.values())
        if most - mine < 2:
            break
        victim = rng.choice(sorted(owner for owner, n in load.items() if n == most))
        candidates = askable[victim]
        chosen.append(candidates.pop(rng.randrange(len(candidates))))
        load[victim] -= 1
        mine += 1
    return tuple(chosen)
