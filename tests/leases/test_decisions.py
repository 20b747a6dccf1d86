"""Pure decisions: expiry, when a child is ready, which leases to create.

(What to take and steal was decided here for scan coordination; the leader's plan is
tested in test_board_decisions.py.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consumer.leases.decisions import (
    is_expired,
    observe,
    ready_keys,
)
from consumer.leases.model import Lease
from consumer.sequence import Position, Sentinel
from consumer.stream import Shard
from consumer.stream.shards import plan_new_leases


def test_unready_leases_are_never_ready() -> None:
    """A child whose parent is unfinished is not ready (nothing gives or reads it)."""
    parent = Lease("p", owner="a", counter=1)
    child = Lease("c", parents=frozenset({"p"}))
    assert ready_keys([parent, child], {"p", "c"}) == {"p"}


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
