"""A lease table deleted and made again while a worker reads a shard.

The new table's lease for the shard (another incarnation, its checkpoint the initial
position) may be given to the worker that still reads the shard under the earlier
lease. Taken at once, that reading went on from memory under the new lease, and the
shard was never read from the new lease's checkpoint: in a CI run the test of a
deleted lease table waited 120 s for a replay that never came. The earlier reading is
now stopped first, and the new lease taken once it has.
"""

from __future__ import annotations

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.sequence import Sentinel

KEY = "shardId-000000000001"


async def _given(store: MemoryLeaseStore, worker: str) -> Lease:
    """The shard's lease created and given to ``worker``, as the leader does."""
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    free = await store.get_lease(KEY)
    assert free is not None
    return await store.take(free, worker)


async def test_a_lease_of_a_table_made_again_stops_the_earlier_reading_first() -> None:
    store = MemoryLeaseStore()
    await store.ensure_table()
    worker = BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    taken: list[Lease] = []
    lost: list[str] = []
    worker.on_taken, worker.on_lost = taken.append, lost.append
    first = await worker.take_given(await _given(store, "w1"))
    assert first is not None
    # An operator deletes the table; a worker makes it again, and the leader gives
    # the shard's new lease (another incarnation, the same owner and counter) to w1.
    store.drop_table()
    await store.ensure_table()
    again = await _given(store, "w1")
    assert again.owner == first.owner
    assert again.incarnation != first.incarnation
    assert await worker.take_given(again) is None
    assert lost == [KEY], "the reading under the earlier lease goes on"
    assert worker.is_lost(KEY)
    assert worker.held[KEY].lease.incarnation == first.incarnation
    # Once that reading stopped (the shard's task forgets the lost lease), the new
    # lease is taken, from its own checkpoint.
    worker.forget(KEY)
    renewed = await worker.take_given(again)
    assert renewed is not None
    assert renewed.incarnation == again.incarnation
    assert renewed.checkpoint is Sentinel.TRIM_HORIZON
    assert [lease.incarnation for lease in taken] == [first.incarnation, again.incarnation]


async def test_a_lease_given_again_in_the_same_incarnation_is_not_judged_lost() -> None:
    store = MemoryLeaseStore()
    await store.ensure_table()
    worker = BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    given = await _given(store, "w1")
    held = await worker.take_given(given)
    assert held is not None
    current = await store.get_lease(KEY)
    assert current is not None
    await worker.take_given(current)
    assert not worker.is_lost(KEY)
