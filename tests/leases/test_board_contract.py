"""The board's contract, on the in-memory fake and on DynamoDB over HTTP: beats are
fenced by counter and fence flag, joins never overwrite a live write, and the lease
operations board coordination adds (acknowledge, owned_by, replacing a hand-off)."""

from __future__ import annotations

import asyncio

import pytest

from consumer.aws import Clients
from consumer.leases.board import BOARD_KEY, Leadership, Slot
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.model import Lease, wall_ms
from consumer.leases.store import SlotLostError
from consumer.sequence import Sentinel
from tests.leases.conftest import Table


async def test_empty_workers_table_and_joins(table: Table) -> None:
    """A workers table with no slot reads as an empty board; a join writes a fresh
    slot stamped with its join time; slots are never leases."""
    store = table.store
    board = await store.read_board()
    assert (board.slots, board.leadership) == ({}, None)
    before = wall_ms()
    a = await store.join("w-a")
    b = await store.join("w-b")
    assert before <= a.joined <= b.joined
    assert (a.counter, a.incoming, a.held, a.leaving, a.fenced) == (0, (), 0, False, False)
    assert sorted((await store.read_board()).slots) == ["w-a", "w-b"]
    assert await store.read_slot("w-a") == a
    assert await store.read_slot("w-nobody") is None
    assert await store.list_leases() == []  # slots are not leases


async def test_a_slot_keeps_its_process_token_and_wake_address(table: Table) -> None:
    """What a join writes for others to read: the process token and the address it is
    woken at survive beats; a rejoin without an address drops the old one."""
    store = table.store
    slot = await store.join("w-a", "token-1", address="10.0.0.7:9100")
    assert (slot.instance, slot.address) == ("token-1", "10.0.0.7:9100")
    slot = await store.beat("w-a", 0, held=0, leaving=False, read=0)
    assert slot.address == "10.0.0.7:9100"
    slot = await store.join("w-a", "token-2", expect=1)
    assert (slot.instance, slot.address) == ("token-2", None)


async def test_racing_joins_all_get_their_slots(table: Table) -> None:
    """Joins in the same moment each get a slot."""
    store = table.store
    await asyncio.gather(*(store.join(f"w-{i}") for i in range(6)))
    board = await store.read_board()
    assert sorted(board.slots) == [f"w-{i}" for i in range(6)]


async def test_a_join_carries_its_process_and_replaces_only_the_slot_expected(
    table: Table,
) -> None:
    """The slot records the joining process's token; a join that expects no slot, or a
    slot at a counter it no longer has, is refused (a beat came between the claim's
    last look and its write) and changes nothing."""
    store = table.store
    slot = await store.join("w-a", "process-1", expect=None)
    assert slot.instance == "process-1"
    with pytest.raises(SlotLostError):
        await store.join("w-a", "process-2", expect=None)
    await store.beat("w-a", 0, held=0, leaving=False, read=0)
    with pytest.raises(SlotLostError):
        await store.join("w-a", "process-2", expect=0)
    assert _slot(await store.read_slot("w-a")).instance == "process-1"
    slot = await store.join("w-a", "process-2", expect=1)
    assert (slot.instance, slot.counter) == ("process-2", 2)
    assert _slot(await store.read_slot("w-a")).instance == "process-2"


async def test_beat_is_fenced_by_counter_and_fence(table: Table) -> None:
    """A beat with the last counter succeeds and returns the worker's own slot; a stale
    counter, a fenced slot or a missing one is refused."""
    store = table.store
    await store.join("w-a")
    await store.join("w-b")
    slot = await store.beat("w-a", 0, held=3, leaving=False, read=0)
    assert (slot.counter, slot.held) == (1, 3)
    assert slot.beat_ms is not None
    assert not slot.unfit
    unfit = await store.beat("w-a", 1, held=0, leaving=True, read=0, unfit=True)
    assert (unfit.leaving, unfit.unfit) == (True, True)
    assert (await store.read_board()).slots["w-a"].unfit
    slot = await store.beat("w-a", 2, held=3, leaving=False, read=0)
    assert not slot.unfit
    with pytest.raises(SlotLostError):
        await store.beat("w-a", 0, held=3, leaving=False, read=0)
    assert not await store.fence("w-b", 5)  # not the counter watched
    assert await store.fence("w-b", 0)
    assert not await store.fence("w-b", 0)  # once
    with pytest.raises(SlotLostError):
        await store.beat("w-b", 0, held=0, leaving=False, read=0)
    with pytest.raises(SlotLostError):
        await store.beat("w-nobody", 0, held=0, leaving=False, read=0)
    assert (await store.read_board()).slots["w-b"].fenced


async def test_rejoin_replaces_a_slot_and_shuts_out_the_old_process(table: Table) -> None:
    """A new process under the same worker id takes a fresh slot (fenced or not); the
    old process's next beat is refused."""
    store = table.store
    await store.join("w-a")
    await store.beat("w-a", 0, held=0, leaving=False, read=0)
    fresh = await store.join("w-a")
    assert (fresh.counter, fresh.fenced) == (2, False)
    with pytest.raises(SlotLostError):
        await store.beat("w-a", 1, held=0, leaving=False, read=0)
    assert await store.fence("w-a", 2)
    slot = await store.join("w-a")
    assert not slot.fenced
    await store.beat("w-a", slot.counter, held=0, leaving=False, read=0)


async def test_incoming_notices_and_leaving(table: Table) -> None:
    """Delivered keys queue in order; a beat drops the ones it read, keeping later
    deliveries; notices count and return the slot (its wake address); a leaving flag
    rides the beat."""
    store = table.store
    await store.join("w-a", address="10.0.0.7:9100")
    assert await store.deliver("w-a", ["s-1", "s-2"])
    slot = await store.beat("w-a", 0, held=0, leaving=False, read=0)
    assert slot.incoming == ("s-1", "s-2")
    assert await store.deliver("w-a", ["s-3"])
    assert _slot(await store.notify("w-a")).address == "10.0.0.7:9100"
    assert _slot(await store.notify("w-a")).notices == 2
    slot = await store.beat("w-a", 1, held=2, leaving=True, read=2, cpu=12.5)
    assert (slot.cpu, slot.incoming, slot.notices, slot.leaving) == (12.5, ("s-3",), 2, True)
    assert not await store.deliver("w-nobody", ["s-1"])
    assert await store.notify("w-nobody") is None
    assert await store.fence("w-a", 2)
    assert not await store.deliver("w-a", ["s-4"])
    assert await store.notify("w-a") is None


async def test_remove_slot_own_or_fenced(table: Table) -> None:
    """A worker removes its own slot by counter; the leader removes only fenced ones."""
    store = table.store
    await store.join("w-a")
    await store.join("w-b")
    assert not await store.remove_slot("w-a")  # not fenced
    assert not await store.remove_slot("w-a", counter=7)
    assert await store.remove_slot("w-a", counter=0)
    assert await store.fence("w-b", 0)
    assert not await store.remove_slot("w-b", counter=0)  # fenced: not its own to remove
    assert await store.remove_slot("w-b")
    assert (await store.read_board()).slots == {}


async def test_the_leader_item_is_claimed_once_renewed_by_its_holder_and_taken_over(
    table: Table,
) -> None:
    """One of two racing claims of a free leader item wins; only the leader renews it
    (naming its deputy); a takeover must name the counter it watched, so a leader that
    renewed meanwhile keeps it; a resignation frees it for the next claim."""
    store = table.store
    assert await store.read_leadership() is None
    won = await asyncio.gather(
        store.claim_leadership("w-a", None, "10.0.0.7:9100"), store.claim_leadership("w-b", None)
    )
    (first,) = [item for item in won if item is not None]
    other = "w-b" if first.leader == "w-a" else "w-a"
    assert first.counter == 0
    assert await store.renew_leadership(other, 0, deputy=None) is None
    renewed = await store.renew_leadership(first.leader, 0, deputy=other, address="h:1")
    assert renewed == Leadership(first.leader, 1, other, "h:1")
    assert await store.read_leadership() == renewed
    assert (await store.read_board()).leadership == renewed
    assert await store.claim_leadership(other, 0) is None  # it moved since the watch
    taken = await store.claim_leadership(other, 1, "h:2")
    assert taken == Leadership(other, 2, None, "h:2")
    assert await store.renew_leadership(first.leader, 1, deputy=None) is None
    assert not await store.resign_leadership(first.leader, 2)
    assert await store.resign_leadership(other, 2)
    assert await store.read_leadership() is None
    assert _leadership(await store.claim_leadership(first.leader, None)).counter == 0


async def test_owned_by_acknowledge_and_replacing_a_handoff(table: Table) -> None:
    """owned_by finds a worker's leases; only the named receiver can acknowledge; a
    pending hand-off is replaced only when the caller names it; transfer clears both."""
    store = table.store
    for key in ("s-1", "s-2", "s-3"):
        await store.create_lease(key, set(), Sentinel.TRIM_HORIZON)
    one = await store.take(_lease(await store.get_lease("s-1")), "w-a")
    await store.take(_lease(await store.get_lease("s-2")), "w-a")
    await store.take(_lease(await store.get_lease("s-3")), "w-b")
    await store.join("w-a")  # a slot never shows up as a lease
    assert await store.owned_by("w-a") == ["s-1", "s-2"]
    assert await store.owned_by("w-nobody") == []
    assert await store.request_handoff(one, "w-b")
    assert not await store.acknowledge("s-1", "w-c")
    assert await store.acknowledge("s-1", "w-b")
    assert _lease(await store.get_lease("s-1")).handoff_ack == "w-b"
    assert not await store.request_handoff(one, "w-c")
    assert not await store.request_handoff(one, "w-c", replacing="w-x")
    assert await store.request_handoff(one, "w-c", replacing="w-b")
    replaced = _lease(await store.get_lease("s-1"))
    assert (replaced.handoff_to, replaced.handoff_ack) == ("w-c", None)
    await store.transfer(replaced, "w-c")
    moved = _lease(await store.get_lease("s-1"))
    assert (moved.owner, moved.handoff_to, moved.handoff_ack) == ("w-c", None, None)


async def test_tables_deleted_under_the_workers(table: Table) -> None:
    """With the tables gone, a beat is refused (every lease is lost with them)."""
    store = table.store
    await store.join("w-a")
    await table.drop()
    with pytest.raises(SlotLostError):
        await store.beat("w-a", 0, held=0, leaving=False, read=0)


@pytest.mark.emulator
async def test_owner_index_is_added_to_an_older_table(aws_clients: Clients) -> None:
    """A table made without the owner index (KCL 2.x, an older lander) gets it."""
    client = aws_clients.dynamodb
    name = "leases-no-index"
    await client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    store = DynamoLeaseStore(client, name)
    await store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    lease = _lease(await store.get_lease("s-1"))
    await store.take(lease, "w-a")
    assert await store.owned_by("w-a") == ["s-1"]  # by Scan before the index exists
    await store.ensure_owner_index()
    assert await store.ensure_owner_index()  # ACTIVE (the emulator builds at once)
    assert await store.owned_by("w-a") == ["s-1"]
    described = await client.describe_table(TableName=name)
    (index,) = described["Table"]["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "LeaseOwnerToLeaseKeyIndex"
    assert index["Projection"]["ProjectionType"] == "KEYS_ONLY"
    item = await client.get_item(TableName=name, Key={"leaseKey": {"S": BOARD_KEY}})
    assert "Item" not in item
    await client.delete_table(TableName=name)


def _lease(lease: Lease | None) -> Lease:
    assert lease is not None
    return lease


def _slot(slot: Slot | None) -> Slot:
    assert slot is not None
    return slot


def _leadership(leadership: Leadership | None) -> Leadership:
    assert leadership is not None
    return leadership
