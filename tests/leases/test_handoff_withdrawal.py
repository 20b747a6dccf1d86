"""A receiver that stops while a lease is being handed to it: the lease ends free,
whichever of the receiver's withdrawal and the owner's transfer comes first.

Found by the image check's compose run: two workers stopped together, each had asked
to receive the other's shards; one acknowledged, stopped, and was handed a lease after
it had gone, so that shard waited the failover time for a worker that was not there.
"""

from __future__ import annotations

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.coordinator import HeldLease
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.sequence import Sentinel

KEY = "shardId-000000000000"


async def _handing_over() -> tuple[MemoryLeaseStore, BoardCoordinator, BoardCoordinator]:
    """The giver holds the lease; the receiver was asked for it and acknowledged; the
    giver has seen the acknowledgement (it would stop reading now)."""
    store = MemoryLeaseStore()
    giver = BoardCoordinator(store, "w-giver", 3.0, 1.0)
    receiver = BoardCoordinator(store, "w-receiver", 3.0, 1.0)
    await giver.join()
    await receiver.join()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    taken = await store.take(await _lease(store), "w-giver")
    giver.held[KEY] = HeldLease(taken, giver.clock())
    assert await store.request_handoff(taken, "w-receiver")
    await receiver._incoming(KEY)  # acknowledges, and starts polling for the lease
    assert receiver.handoffs.receiving(KEY)
    giver.notice_handoff(await _lease(store))
    assert giver.held[KEY].handoff_to == "w-receiver"
    await receiver.start_leaving()  # SIGTERM reaches the receiver
    return store, giver, receiver


async def _lease(store: MemoryLeaseStore) -> Lease:
    found = await store.get_lease(KEY)
    assert found is not None
    return found


async def test_the_receiver_withdraws_first_and_the_owner_releases() -> None:
    store, giver, receiver = await _handing_over()
    await receiver.release_unheld()  # the receiver's last step before it leaves
    assert not receiver.handoffs.receiving(KEY)
    assert await giver.give_up(KEY) is None  # the transfer is refused: released
    lease = await _lease(store)
    assert (lease.owner, lease.handoff_to, lease.handoff_ack) == (None, None, None)


async def test_the_owner_transfers_first_and_the_receiver_passes_it_on() -> None:
    store, giver, receiver = await _handing_over()
    assert await giver.give_up(KEY) == "w-receiver"
    assert (await _lease(store)).owner == "w-receiver"
    await receiver.release_unheld()
    assert KEY not in receiver.held
    lease = await _lease(store)
    assert (lease.owner, lease.handoff_to) == (None, None)


async def _acknowledged() -> tuple[MemoryLeaseStore, BoardCoordinator]:
    """The giver holds the lease; a receiver that stays asked for it and acknowledged."""
    store = MemoryLeaseStore()
    giver = BoardCoordinator(store, "w-giver", 3.0, 1.0)
    await giver.join()
    await store.create_lease(KEY, frozenset(), Sentinel.TRIM_HORIZON)
    taken = await store.take(await _lease(store), "w-giver")
    giver.held[KEY] = HeldLease(taken, giver.clock())
    assert await store.request_handoff(taken, "w-receiver")
    assert await store.acknowledge(KEY, "w-receiver")
    giver.notice_handoff(await _lease(store))
    return store, giver


async def test_a_receiver_that_stays_still_gets_the_lease() -> None:
    """Without a stop the hand-off is as before: the transfer goes through."""
    store, giver = await _acknowledged()
    assert await giver.give_up(KEY) == "w-receiver"
    assert (await _lease(store)).owner == "w-receiver"


async def test_a_lease_read_to_its_end_while_handed_over_is_released_not_transferred() -> None:
    """The owner reached the shard's end between the leader's hand-off request and the
    receiver's acknowledgement: the receiver would be handed a finished lease and fail
    on it ('shard already read to its end', seen in a chaos run's log), so it is
    released, and the receiver's wait ends because the lease no longer names it."""
    store, giver = await _acknowledged()
    await giver.checkpoint(KEY, Sentinel.SHARD_END)
    assert await giver.give_up(KEY, "shard_end") is None
    lease = await _lease(store)
    assert lease.finished
    assert (lease.owner, lease.handoff_to) == (None, None)
