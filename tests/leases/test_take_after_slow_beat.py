"""A lease given to a worker whose last beat ended outside its acting window.

A beat slowed by throttling or a retried write can return after ``stale_after``: the
worker is then not fresh, and it used to skip the leases delivered to it, counting
them as read. Nobody else reads such a lease (it names a live worker) until the
leader's next sweep finds it astray, up to a minute later. The worker now beats
again and takes it; and the sweep's astray check no longer misses such a lease when
the worker is also handing one over.
"""

from __future__ import annotations

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.sequence import Sentinel

KEY = "shardId-000000000000"


async def test_a_lease_given_while_not_fresh_is_taken_after_a_new_beat() -> None:
    store = MemoryLeaseStore()
    now = [100.0]
    worker = BoardCoordinator(store, "w1", 3.0, 1.0, clock=lambda: now[0])
    await worker.join()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    lease = await store.get_lease(KEY)
    assert lease is not None
    given = await store.take(lease, "w1")  # as the leader gives it
    now[0] += worker.stale_after + 0.5  # the last beat started too long ago
    assert not worker.fresh()
    await worker.take_given(given)
    assert KEY in worker.held
    assert worker.fresh()
    taken = await store.get_lease(KEY)
    assert taken is not None
    assert taken.owner == "w1"
    assert taken.counter > given.counter


async def test_a_given_lease_not_taken_is_astray_even_beside_a_pending_hand_off() -> None:
    """The leader's sweep finds a worker whose beat reports fewer leases than name it,
    and has it read its leases again. A lease the worker is handing over still counts
    for it (it holds it until the transfer): left out, a given lease the worker never
    took hid behind it."""
    from consumer.leases.board import Board, Slot
    from consumer.leases.model import Lease

    store = MemoryLeaseStore()
    leader = BoardCoordinator(store, "w0", 3.0, 1.0)
    board = Board(slots={"w0": Slot(counter=1, joined=0), "w1": Slot(counter=1, joined=1, held=1)})
    handing = Lease(key="shardId-000000000001", owner="w1", counter=3, handoff_to="w0")
    leader.leader.view = {handing.key: handing}
    assert leader.leader._astray(board) == []  # it holds the one it hands over
    given = Lease(key=KEY, owner="w1", counter=1)
    leader.leader.view[KEY] = given
    assert leader.leader._astray(board) == ["w1"]  # given, never taken
