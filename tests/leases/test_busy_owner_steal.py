"""The leader asks a busy owner for a hand-off: the owner's checkpoints do not refuse it.

A shard that gets records all the time checkpoints several times a second, and each
checkpoint moves the lease counter. A request conditional on the counter the leader
read lost that race whenever a checkpoint came between the read and the write, which
on a saturated table (CI: 2 cores, four workers, one emulator) was nearly always, so
one worker kept three leases while another waited for its share for the whole test
(test_balance_steal_and_graceful_leave[board], three rare CI failures). Here the owner
checkpoints after every read anyone makes, the worst case of that race.
"""

from __future__ import annotations

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.sequence import Position, Sentinel

KEYS = ("shardId-000000000000", "shardId-000000000001")


class BusyOwnerStore(MemoryLeaseStore):
    """Whatever anyone reads, the busy owner checkpoints right after."""

    def __init__(self, owner: str) -> None:
        super().__init__()
        self.owner = owner
        self.checkpoints = 0

    async def get_lease(self, key: str) -> Lease | None:
        found = await super().get_lease(key)
        await self._checkpoint_all()
        return found

    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        found = await super().list_leases(consistent=consistent)
        await self._checkpoint_all()
        return found

    async def _checkpoint_all(self) -> None:
        for lease in list((self.leases or {}).values()):
            if lease.owner == self.owner:
                self.checkpoints += 1
                await super().checkpoint(lease, Position(self.checkpoints))


async def test_the_leader_asks_a_busy_owner_in_one_pass() -> None:
    store = BusyOwnerStore("w-busy")
    leader = BoardCoordinator(store, "w-lead", 3.0, 1.0)
    busy = BoardCoordinator(store, "w-busy", 3.0, 1.0)
    await leader.beat_pass()  # joins first: it leads
    await busy.beat_pass()
    await leader.beat_pass()
    for key in KEYS:
        await store.create_lease(key, frozenset(), Sentinel.TRIM_HORIZON)
        created = await store.get_lease(key)
        assert created is not None
        await store.take(created, "w-busy")
    assert leader.is_leader()

    await leader.lead_pass()

    leases = [await store.get_lease(key) for key in KEYS]
    asked = [lease for lease in leases if lease is not None and lease.handoff_to == "w-lead"]
    assert len(asked) == 1, leases
    assert all(lease is not None and lease.owner == "w-busy" for lease in leases)
    assert store.checkpoints > 0  # the owner did move the counters in between
