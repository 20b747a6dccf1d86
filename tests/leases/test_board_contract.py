"""The board's contract, on the in-memory fake and on DynamoDB over HTTP: beats are
fenced by counter and fence flag, joins never overwrite a live write, and the lease
operations board coordination adds (acknowledge, owned_by, replacing a hand-off)."""

from __future__ import annotations

import asyncio

import pytest

from consumer.aws import Clients
from consumer.leases.board import BOARD_KEY
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.model import Lease
from consumer.leases.store import SlotLostError
from consumer.sequence import Sentinel
from tests.leases.conftest import Table


async def test_empty_board_and_joins_in_order(table: Table) -> None:
    """A table with no board reads as an empty board; joins are numbered in order."""
    store = table.store
    assert (await store.read_board()).slots == {}
    await store.join("w-a")
    board = await store.join("w-b")
    assert board.joins == 2
    assert board.slots["w-a"].joined == 0
    assert board.slots["w-b"].joined == 1
    assert board.slots["w-a"].counter == 0
    assert board.slots["w-a"].incoming == ()
    assert await store.list_leases() == []  # the board is not a lease


async def test_a_slot_keeps_its_process_token_and_wake_address(table: Table) -> None:
    """What a join writes for others to read: the process token and the address it is
    woken at survive beats; a rejoin without an address drops the old one."""
    store = table.store
    board = await store.join("w-a", "token-1", address="10.0.0.7:9100")
    assert board.slots["w-a"].instance == "token-1"
    assert board.slots["w-a"].address == "10.0.0.7:9100"
    board = await store.beat("w-a", 0, held=0, leaving=False, read=0)
    assert board.slots["w-a"].address == "10.0.0.7:9100"
    board = await store.join("w-a", "token-2", expect=1)
    assert (board.slots["w-a"].instance, board.slots["w-a"].address) == ("token-2", None)


async def test_racing_joins_all_get_distinct_places(table: Table) -> None:
    """Joins in the same moment each get a slot and a distinct join number."""
    store = table.store
    await asyncio.gather(*(store.join(f"w-{i}") for i in range(6)))
    board = await store.read_board()
    assert sorted(board.slots) == [f"w-{i}" for i in range(6)]
    assert sorted(slot.joined for slot in board.slots.values()) == list(range(6))


async def test_a_join_carries_its_process_and_replaces_only_the_slot_expected(
    table: Table,
) -> None:
    """The slot records the joining process's token; a join that expects no slot, or a
    slot at a counter it no longer has, is refused (a beat came between the claim's
    last look and its write) and changes nothing."""
    store = table.store
    board = await store.join("w-a", "process-1", expect=None)
    assert board.slots["w-a"].instance == "process-1"
    with pytest.raises(SlotLostError):
        await store.join("w-a", "process-2", expect=None)
    await store.beat("w-a", 0, held=0, leaving=False, read=0)
    with pytest.raises(SlotLostError):
        await store.join("w-a", "process-2", expect=0)
    assert (await store.read_board()).slots["w-a"].instance == "process-1"
    board = await store.join("w-a", "process-2", expect=1)
    assert board.slots["w-a"].instance == "process-2"
    assert board.slots["w-a"].counter == 2
    assert (await store.read_board()).slots["w-a"].instance == "process-2"


async def test_beat_is_fenced_by_counter_and_fence(table: Table) -> None:
    """A beat with the last counter succeeds and returns every slot; a stale counter,
    a fenced slot or a missing one is refused."""
    store = table.store
    await store.join("w-a")
    await store.join("w-b")
    board = await store.beat("w-a", 0, held=3, leaving=False, read=0)
    assert board.slots["w-a"].counter == 1
    assert board.slots["w-a"].held == 3
    assert "w-b" in board.slots
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
    board = await store.join("w-a")
    fresh = board.slots["w-a"]
    assert fresh.counter == 2
    assert fresh.joined == 1
    assert not fresh.fenced
    with pytest.raises(SlotLostError):
        await store.beat("w-a", 1, held=0, leaving=False, read=0)
    assert await store.fence("w-a", 2)
    board = await store.join("w-a")
    assert not board.slots["w-a"].fenced
    await store.beat("w-a", board.slots["w-a"].counter, held=0, leaving=False, read=0)


async def test_incoming_notices_and_leaving(table: Table) -> None:
    """Delivered keys queue in order; a beat drops the ones it read, keeping later
    deliveries; notices count; a leaving flag rides the beat."""
    store = table.store
    await store.join("w-a")
    assert await store.deliver("w-a", ["s-1", "s-2"])
    board = await store.beat("w-a", 0, held=0, leaving=False, read=0)
    assert board.slots["w-a"].incoming == ("s-1", "s-2")
    assert await store.deliver("w-a", ["s-3"])
    assert await store.notify("w-a")
    assert await store.notify("w-a")
    board = await store.beat("w-a", 1, held=2, leaving=True, read=2, cpu=12.5)
    slot = board.slots["w-a"]
    assert slot.cpu == 12.5
    assert slot.incoming == ("s-3",)
    assert slot.notices == 2
    assert slot.leaving
    assert not await store.deliver("w-nobody", ["s-1"])
    assert not await store.notify("w-nobody")
    assert await store.fence("w-a", 2)
    assert not await store.deliver("w-a", ["s-4"])


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


async def test_owned_by_acknowledge_and_replacing_a_handoff(table: Table) -> None:
    """owned_by finds a worker's leases; only the named receiver can acknowledge; a
    pending hand-off is replaced only when the caller names it; transfer clears both."""
    store = table.store
    for key in ("s-1", "s-2", "s-3"):
        await store.create_lease(key, set(), Sentinel.TRIM_HORIZON)
    one = await store.take(_lease(await store.get_lease("s-1")), "w-a")
    await store.take(_lease(await store.get_lease("s-2")), "w-a")
    await store.take(_lease(await store.get_lease("s-3")), "w-b")
    await store.join("w-a")  # the board never shows up as a lease
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


async def test_table_deleted_under_the_board(table: Table) -> None:
    """With the table gone, a beat is refused (every lease is lost with it)."""
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
