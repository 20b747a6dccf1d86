"""Pure lease decisions: expiry, and readiness after resharding.

Nothing here does I/O or reads a clock; the caller passes ``now`` (its own monotonic
clock) and a random generator, so every decision can be replayed and property-tested.

Expiry is judged the KCL way. A worker never compares timestamps written by another
machine: it remembers, per lease, the counter it last saw and when (on its own
monotonic clock) it first saw that value. A lease whose counter has not moved for
``failover`` seconds is expired. A live owner moves its counter well within that time
(a lander worker's board slot with every beat; a KCL worker's lease with every
renewal), so it never looks expired, and clock skew between machines cannot expire a
lease early.
"""

from __future__ import annotations

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
