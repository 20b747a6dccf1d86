"""Pure decisions: what to take and steal, when a child is ready, which leases to create."""

from __future__ import annotations

import math
import random
from collections import Counter

from hypothesis import event, example, given
from hypothesis import strategies as st

from consumer.leases.decisions import (
    Seen,
    is_expired,
    observe,
    plan_acquisitions,
    ready_keys,
)
from consumer.leases.model import Lease
from consumer.sequence import Position, Sentinel
from consumer.stream import Shard
from consumer.stream.shards import plan_new_leases

WORKERS = ["me", "a", "b", "c"]
Table = tuple[list[Lease], dict[str, Seen], set[str], float]


# When a lease's counter was last seen to move, at now = 30 s with failover = 10 s: a
# live owner's less than 10 s ago (just inside, too), a stopped one's 10 s ago or more
# (exactly 10, too), and a flaky owner's at any time.
RENEWED = {
    "live": st.floats(20.01, 30) | st.just(20.01),
    "stopped": st.floats(0, 20) | st.just(20.0),
    "flaky": st.floats(0, 30),
}


@st.composite
def tables(draw: st.DrawFn) -> Table:
    """A table of leases spread unevenly between free ones and the workers (live,
    stopped or flaky; some leases asked to hand over to another worker), what 'me' has
    seen of them, and now."""
    spread = [(None, 2), ("me", 2), ("a", 8), ("b", 3), ("c", 2)]
    owners = [owner for owner, most in spread for _ in range(draw(st.integers(0, most)))]
    owners = draw(st.permutations(owners or [None]))
    healths = st.sampled_from(["live", "live", "live", "stopped", "flaky"])
    health = {worker: draw(healths) for worker in WORKERS}
    leases = []
    seen = {}
    for index, owner in enumerate(owners):
        counter = draw(st.integers(0, 5))
        others = [w for w in WORKERS if w != owner]
        handoff_to = draw(st.sampled_from([None] * 6 + others)) if owner else None
        leases.append(
            Lease(key=f"s{index:02d}", owner=owner, counter=counter, handoff_to=handoff_to)
        )
        since = draw(RENEWED[health[owner] if owner else "flaky"])
        seen[f"s{index:02d}"] = Seen(counter, since)
    held = {lease.key for lease in leases if lease.owner == "me" and draw(st.booleans())}
    return leases, seen, held, 30.0


def _live(owner: str, since: float = 25.0, count: int = 1) -> Table:
    """``count`` leases of ``owner`` whose counter last moved at ``since`` (so live at
    now = 30 with failover = 10 unless ``since`` <= 20), none of them held by 'me'."""
    keys = [f"{owner}{i:02d}" for i in range(count)]
    leases = [Lease(key=key, owner=owner, counter=1) for key in keys]
    return leases, {key: Seen(1, since) for key in keys}, set(), 30.0


@given(tables(), st.integers(0, 2**32))
def test_plan_never_takes_a_live_lease_or_one_already_held(table: Table, seed: int) -> None:
    """Takes are only of free, expired or already-ours leases, never held ones, and
    never push this worker past its target."""
    leases, seen, held, now = table
    ready = {lease.key for lease in leases}
    plan = plan_acquisitions(
        "me", leases, held, seen, now=now, failover=10, ready=ready, rng=random.Random(seed)
    )
    for lease in plan.take:
        assert lease.key not in held
        assert lease.owner in (None, "me") or is_expired(lease, seen, now, 10)
    ours = sum(1 for lease in leases if lease.owner == "me" and lease.key not in held)
    assert len(held) + len(plan.take) <= max(plan.target, len(held) + ours)
    assert plan.target == math.ceil(len(leases) / plan.live_workers)


@given(tables(), st.integers(0, 2**32))
@example(table=_live("a", count=4), seed=0)  # nothing free, "a" holds 4 of 4: ask "a" for two
def test_steals_only_narrow_the_gap(table: Table, seed: int) -> None:
    """Hand-offs are requested for at most what this worker lacks after its takes and
    the hand-offs already coming to it; replayed in order, each asks a worker that is
    then the most loaded (leases being handed away not counted) and holds at least two
    more than this worker will, for a lease not already being handed over; and it stops
    asking only when it has enough or no worker is two ahead."""
    leases, seen, held, now = table
    ready = {lease.key for lease in leases}
    plan = plan_acquisitions(
        "me", leases, held, seen, now=now, failover=10, ready=ready, rng=random.Random(seed)
    )
    live = [
        lease
        for lease in leases
        if lease.owner not in (None, "me") and not is_expired(lease, seen, now, 10)
    ]
    load = Counter(lease.owner for lease in live if lease.handoff_to is None)
    coming = sum(
        1
        for lease in leases
        if lease.key not in held and lease.handoff_to == "me" and lease not in plan.take
    )
    after = len(held) + len(plan.take) + coming
    event(f"{min(len(plan.handoffs), 2)}+ hand-offs requested")
    assert len(plan.handoffs) <= max(0, plan.target - after)
    assert len(set(plan.handoffs)) == len(plan.handoffs)
    for lease in plan.handoffs:
        assert lease in live
        assert lease.handoff_to is None
        most = max(load.values())
        assert load[lease.owner] == most
        assert most - after >= 2
        load[lease.owner] -= 1
        after += 1
    if after < plan.target:  # it stopped short: no worker left two ahead of it
        assert max(load.values(), default=0) - after < 2


def test_a_worker_short_of_its_share_asks_for_all_of_it_minus_what_is_coming() -> None:
    """A worker takes the expired lease and, still two short of its share, asks the
    most loaded live worker for two (not the less loaded one); with one hand-off
    already coming to it, for one; with two coming, for none."""
    a_leases, a_seen, _, now = _live("a", count=5)
    b_leases, b_seen, _, _ = _live("b", count=2)
    c_leases, c_seen, _, _ = _live("c", since=0.0)  # "c" stopped renewing 30 s ago
    leases = a_leases + b_leases + c_leases
    seen = a_seen | b_seen | c_seen
    ready = {lease.key for lease in leases}
    for seed in range(20):
        plan = plan_acquisitions(
            "me", leases, set(), seen, now=now, failover=10, ready=ready, rng=random.Random(seed)
        )
        assert (plan.target, plan.live_workers, plan.take) == (3, 3, tuple(c_leases))
        assert len(plan.handoffs) == 2
        assert set(plan.handoffs) <= set(a_leases)

    for coming, asked in ((1, 1), (2, 0)):
        marked = [lease.evolve(handoff_to="me") for lease in a_leases[:coming]]
        table = [*marked, *a_leases[coming:], *b_leases, *c_leases]
        plan = plan_acquisitions(
            "me", table, set(), seen, now=now, failover=10, ready=ready, rng=random.Random(1)
        )
        assert plan.take == tuple(c_leases)
        assert len(plan.handoffs) == asked
        assert set(plan.handoffs) <= set(a_leases[coming:])


def test_unready_leases_are_never_planned() -> None:
    """A child whose parent is unfinished is neither taken nor counted."""
    parent = Lease("p", owner="a", counter=1)
    child = Lease("c", parents=frozenset({"p"}))
    leases = [parent, child]
    seen = observe({}, leases, 0.0)
    ready = ready_keys(leases, {"p", "c"})
    assert ready == {"p"}
    plan = plan_acquisitions(
        "me", leases, set(), seen, now=1.0, failover=10, ready=ready, rng=random.Random(1)
    )
    assert plan.take == ()


def test_expiry_is_counter_stillness_on_the_observers_clock() -> None:
    """A lease expires only after its counter stood still for failover here."""
    lease = Lease("s", owner="a", counter=3)
    seen = observe({}, [lease], now=100.0)
    assert not is_expired(lease, seen, 109.9, 10)
    assert is_expired(lease, seen, 110.0, 10)
    moved = lease.evolve(counter=4)
    seen = observe(seen, [moved], now=109.0)
    assert not is_expired(moved, seen, 118.9, 10)
    assert observe(seen, [moved], now=200.0)["s"].since == 109.0


def test_children_wait_for_every_parent() -> None:
    """A merge child waits for both parents; a missing parent counts as done only if
    the stream no longer lists it."""
    done = Lease("p1", checkpoint=Sentinel.SHARD_END)
    busy = Lease("p2", checkpoint=Position(5))
    child = Lease("c", parents=frozenset({"p1", "p2"}))
    assert "c" not in ready_keys([done, busy, child], {"p1", "p2", "c"})
    assert "c" in ready_keys([done, busy.evolve(checkpoint=Sentinel.SHARD_END), child], None)
    orphan = Lease("o", parents=frozenset({"gone"}))
    assert "o" not in ready_keys([orphan], None)
    assert "o" not in ready_keys([orphan], {"gone", "o"})
    assert "o" in ready_keys([orphan], {"o"})
    assert "p1" not in ready_keys([done], {"p1"})


@st.composite
def lineages(draw: st.DrawFn) -> list[Shard]:
    """A random history of splits and merges as ListShards would report it."""
    shards = [Shard(f"s{i}") for i in range(draw(st.integers(1, 3)))]
    open_ids = [s.shard_id for s in shards]
    for step in range(draw(st.integers(0, 6))):
        if len(open_ids) >= 2 and draw(st.booleans()):
            a, b = open_ids.pop(0), open_ids.pop(0)
            child = Shard(f"m{step}", frozenset({a, b}))
            shards.append(child)
            open_ids.append(child.shard_id)
        else:
            parent = open_ids.pop(draw(st.integers(0, len(open_ids) - 1)))
            for side in "lr":
                child = Shard(f"x{step}{side}", frozenset({parent}))
                shards.append(child)
                open_ids.append(child.shard_id)
    return draw(st.permutations(shards))


@given(lineages(), st.data())
def test_new_leases_come_parents_first_and_children_of_known_shards_from_the_start(
    shards: list[Shard], data: st.DataObject
) -> None:
    """Leases are created parents before children; a shard descending from one that
    already had a lease starts at TRIM_HORIZON; the rest at the initial position."""
    ids = [s.shard_id for s in shards]
    existing = set(data.draw(st.sets(st.sampled_from(ids))) if ids else set())
    plan = plan_new_leases(shards, existing, Sentinel.LATEST)
    order = [new.key for new in plan]
    assert set(order) == set(ids) - existing
    position = {key: i for i, key in enumerate(order)}
    by_id = {s.shard_id: s for s in shards}
    for new in plan:
        for parent in new.parents:
            if parent in position:
                assert position[parent] < position[new.key]

    def descends_from_existing(shard_id: str) -> bool:
        return any(
            p in existing or (p in by_id and p not in existing and descends_from_existing(p))
            for p in by_id[shard_id].parents
        )

    for new in plan:
        expected = Sentinel.TRIM_HORIZON if descends_from_existing(new.key) else Sentinel.LATEST
        assert new.checkpoint is expected, new
