"""A worker reading its leases while it takes one of them.

A notice has the worker read every lease naming it; a delivery of the same key can take
that lease while the read is on the wire. The read then shows the lease as it was
before the take (no owner, or the previous one, a lower counter), and judging the
fresh take by it stopped a shard this worker had just taken: in a CI run the shard
waited for the leader's next sweep, a minute, and the test timed out. A lease taken
(or dropped) while it was read is now left alone.
"""

from __future__ import annotations

import asyncio

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.sequence import Sentinel

KEY = "shardId-000000000000"


class SlowReads(MemoryLeaseStore):
    """GetItem answers with the item as it was when the read began, once let go; the
    owner index lists the key already (it is eventually consistent)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = asyncio.Event()
        self.reading = asyncio.Event()

    async def get_lease(self, key: str) -> Lease | None:
        lease = await super().get_lease(key)
        self.reading.set()
        await self.hold.wait()
        return lease

    async def owned_by(self, owner: str) -> list[str]:
        return sorted({*await super().owned_by(owner), KEY})


async def test_a_lease_taken_while_an_older_read_of_it_is_answered_is_kept() -> None:
    store = SlowReads()
    worker = BoardCoordinator(store, "w1", 3.0, 1.0)
    store.hold.set()
    await worker.join()
    store.hold.clear()
    store.reading.clear()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    free = await MemoryLeaseStore.get_lease(store, KEY)
    assert free is not None
    previous = await store.take(free, "w0")
    # The notice's read begins while another worker owns the lease ...
    reading = asyncio.create_task(worker.read_own_leases())
    await store.reading.wait()
    # ... which it releases; the leader gives it to this worker, and a delivery has
    # this worker take it, all before that read is answered.
    await store.release(previous)
    unowned = await MemoryLeaseStore.get_lease(store, KEY)
    assert unowned is not None
    given = await store.take(unowned, "w1")
    taken: list[Lease] = []
    worker.on_taken = taken.append
    await worker.take_given(given)
    assert KEY in worker.held
    store.hold.set()
    await reading
    assert not worker.is_lost(KEY), "a fresh take was judged by an older read"
    lease = await store.get_lease(KEY)
    assert lease is not None
    assert (lease.owner, lease.counter) == ("w1", worker.held[KEY].lease.counter)
    assert len(taken) == 1
