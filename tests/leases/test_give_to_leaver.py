"""A lease the leader gives to a worker that is already on its way out.

Found by the image check (about one run in two): every worker was stopped at once;
the leader, still planning from a board read before a receiver flagged itself leaving,
gave it a free lease after the receiver's last look at the leases naming it. Nobody
was left to expire the receiver, so the lease stayed owned after every worker exited.
The leader now takes such a lease back: each pass, and once more before it leaves.
"""

from __future__ import annotations

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.sequence import Sentinel

KEY = "shardId-000000000000"


async def _lease(store: MemoryLeaseStore) -> Lease:
    found = await store.get_lease(KEY)
    assert found is not None
    return found


async def _fleet() -> tuple[MemoryLeaseStore, BoardCoordinator, BoardCoordinator]:
    """A leader and a receiver on the board, both seen live by the leader, and a free
    lease."""
    store = MemoryLeaseStore()
    leader = BoardCoordinator(store, "w-leader", 3.0, 1.0)
    receiver = BoardCoordinator(store, "w-receiver", 3.0, 1.0)
    await leader.join()
    await receiver.join()
    await leader.roster.read()  # the leader's board: the receiver live, not leaving
    assert leader.is_leader()
    assert not leader.roster.board.slots["w-receiver"].leaving
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    return store, leader, receiver


async def _receiver_stops(receiver: BoardCoordinator) -> None:
    """SIGTERM: flag the slot, pass on what names it (nothing yet), leave the board."""
    await receiver.start_leaving()
    await receiver.release_unheld()


async def test_a_lease_given_after_the_receiver_looked_is_taken_back_when_the_leader_leaves() -> (
    None
):
    store, leader, receiver = await _fleet()
    await _receiver_stops(receiver)
    # The leader gives from its board read before the receiver's flag.
    assert await leader.leader._give(await _lease(store), "w-receiver") is not None
    assert (await _lease(store)).owner == "w-receiver"
    await receiver.leave()
    await leader.leave()  # the whole fleet stops: nobody would expire the receiver
    assert (await _lease(store)).owner is None


async def test_a_receiver_still_flagged_leaving_loses_the_lease_at_the_next_pass() -> None:
    store, leader, receiver = await _fleet()
    await _receiver_stops(receiver)
    given = await leader.leader._give(await _lease(store), "w-receiver")
    assert given is not None
    await leader.roster.read()  # now the leader sees the flag
    assert leader.roster.board.slots["w-receiver"].leaving
    await leader.lead_pass()
    lease = await _lease(store)
    assert lease.owner != "w-receiver"  # free, or already given to the leader itself
    assert lease.counter > given.counter


async def test_a_lease_the_receiver_took_is_never_taken_back() -> None:
    """The release is conditional on the lease as given: a take moved its counter."""
    store, leader, receiver = await _fleet()
    given = await leader.leader._give(await _lease(store), "w-receiver")
    assert given is not None
    await receiver.read_own_leases()  # the receiver takes it
    assert KEY in receiver.held
    await receiver.start_leaving()
    await leader.roster.read()
    await leader.lead_pass()
    assert (await _lease(store)).owner == "w-receiver"  # the receiver hands it over itself


async def test_a_receiver_that_stays_keeps_what_it_was_given() -> None:
    store, leader, _ = await _fleet()
    assert await leader.leader._give(await _lease(store), "w-receiver") is not None
    await leader.roster.read()
    await leader.lead_pass()
    await leader.leave()
    assert (await _lease(store)).owner == "w-receiver"
