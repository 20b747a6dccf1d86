"""What the shards tell the coordinator about a lease is kept only while it is held: a
shard task that reports after its lease was given up (its last batch's lag, its load)
leaves nothing behind for a lease the worker may never hold again."""

from __future__ import annotations

import asyncio

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease, ShardLoad, ShardReport
from consumer.sequence import Sentinel

KEY = "shardId-000000000000"
REPORT = ShardReport(pending=1, checkpoint_age_ms=5, failures=1, last_error="boom")


async def _holding() -> tuple[MemoryLeaseStore, BoardCoordinator]:
    store = MemoryLeaseStore()
    worker = BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    lease = await store.get_lease(KEY)
    assert lease is not None
    assert await worker.take_given(lease) is not None
    return store, worker


async def test_what_a_held_shard_reports_is_written_with_its_lease() -> None:
    store, worker = await _holding()
    worker.lagging(KEY, 1500)
    worker.measured(KEY, ShardLoad(10.0, 2.0))
    worker.report(KEY, REPORT)
    assert await worker.write_report(KEY) == REPORT
    lease = await store.get_lease(KEY)
    assert lease is not None
    assert (lease.lag_ms, lease.report) == (1500, REPORT)
    assert worker.load(KEY) == ShardLoad(10.0, 2.0)
    assert worker.holding(KEY) is not None
    assert worker.held_keys() == [KEY]


async def test_reports_after_the_lease_was_given_up_are_dropped() -> None:
    _, worker = await _holding()
    assert await worker.give_up(KEY) is None
    worker.lagging(KEY, 1500)
    worker.measured(KEY, ShardLoad(10.0, 2.0))
    worker.report(KEY, REPORT)
    assert worker.held_keys() == []
    assert worker.holding(KEY) is None
    assert worker.load(KEY) is None
    assert await worker.write_report(KEY) is None


async def test_a_lost_lease_is_not_held_for_the_shards() -> None:
    _, worker = await _holding()
    lost: list[str] = []
    worker.listen(taken=lambda _: None, handoff=lambda _: None, lost=lost.append)
    worker.lose(KEY, "taken by another worker")
    assert lost == [KEY]
    assert worker.holding(KEY) is None  # lost: nothing more may be done under it
    assert worker.held_keys() == [KEY]  # until the shard's task forgets it


class _CountingStore(MemoryLeaseStore):
    def __init__(self) -> None:
        super().__init__()
        self.takes = 0

    async def take(self, lease: Lease, owner: str) -> Lease:
        self.takes += 1
        await asyncio.sleep(0)  # a round trip: the other path runs meanwhile
        return await super().take(lease, owner)


async def test_a_lease_found_given_by_two_paths_at_once_is_taken_once() -> None:
    """The receiver's poll and a delivery can find the same lease given together: one
    take, not a second one refused (a billed write and a warning for nothing)."""
    store = _CountingStore()
    worker = BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    lease = await store.get_lease(KEY)
    assert lease is not None
    taken: list[Lease] = []
    worker.listen(taken=taken.append, handoff=lambda _: None, lost=lambda _: None)
    results = await asyncio.gather(worker.take_given(lease), worker.take_given(lease))
    assert [r is not None for r in results] == [True, False]
    assert store.takes == 1
    assert [t.key for t in taken] == [KEY]
