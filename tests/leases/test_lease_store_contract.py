"""One contract for the lease table, run against the in-memory fake and DynamoDB.

The DynamoDB side talks HTTP to the embedded emulator (moto behind one lock), so
these tests pin what the conditional expressions really do, not what we think they do.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from consumer.aws import Clients
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.model import Lease, LeaseLostError, ShardLoad
from consumer.leases.store import LeaseStore, TableMissingError
from consumer.sequence import Position, Sentinel
from tests.leases.conftest import Table

BIG = 49590338271490256608559692538361571095921575989136588898


async def _one(store: LeaseStore, key: str) -> Lease:
    return next(lease for lease in await store.list_leases() if lease.key == key)


async def test_create_is_once_only_and_unowned(table: Table) -> None:
    """create_lease creates an unowned lease once and refuses to overwrite it."""
    assert await table.store.create_lease("s-1", {"p-1", "p-2"}, Sentinel.LATEST)
    assert not await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    lease = await _one(table.store, "s-1")
    assert lease.incarnation is not None
    made = Lease(key="s-1", checkpoint=Sentinel.LATEST, parents=frozenset({"p-1", "p-2"}))
    assert lease == made.evolve(incarnation=lease.incarnation)


async def test_ensure_table_is_idempotent(table: Table) -> None:
    """ensure_table on an existing table keeps its leases."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    await table.store.ensure_table()
    assert [lease.key for lease in await table.store.list_leases()] == ["s-1"]


async def test_table_changes_name_what_start_up_would_do_and_do_nothing(table: Table) -> None:
    """A ready table needs no change; a missing one would be created, and asking
    creates nothing (``lander run --check``)."""
    assert await table.store.table_exists()
    assert await table.store.table_changes() == []
    assert await table.store.ensure_owner_index()
    await table.drop()
    assert not await table.store.table_exists()
    lease_table, workers_table = await table.store.table_changes()
    assert lease_table.startswith("create the lease table")
    assert workers_table.startswith("create the workers table")
    assert not await table.store.table_exists()


async def test_take_is_conditional_on_what_was_observed(table: Table) -> None:
    """A take succeeds once per observation; a stale observation loses."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    seen = await _one(table.store, "s-1")
    taken = await table.store.take(seen, "w1")
    assert (taken.owner, taken.counter, taken.owner_switches) == ("w1", 1, 1)
    with pytest.raises(LeaseLostError):
        await table.store.take(seen, "w2")
    assert (await _one(table.store, "s-1")).owner == "w1"


async def test_racing_takes_have_exactly_one_winner(table: Table) -> None:
    """Eight workers take the same observed lease at once: exactly one wins."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    for _ in range(5):
        seen = await _one(table.store, "s-1")
        results = await asyncio.gather(
            *(table.store.take(seen, f"w{i}") for i in range(8)), return_exceptions=True
        )
        winners = [r for r in results if isinstance(r, Lease)]
        assert len(winners) == 1
        assert all(isinstance(r, LeaseLostError) for r in results if not isinstance(r, Lease))
        assert (await _one(table.store, "s-1")).owner == winners[0].owner


async def test_renew_is_fenced_by_counter_and_owner(table: Table) -> None:
    """Renew bumps the counter; a stale counter or another owner's renew is refused."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await table.store.take(await _one(table.store, "s-1"), "w1")
    renewed = await table.store.renew(mine)
    assert renewed.counter == mine.counter + 1
    with pytest.raises(LeaseLostError):
        await table.store.renew(mine)
    with pytest.raises(LeaseLostError):
        await table.store.renew(renewed.evolve(owner="w2"))


async def test_checkpoint_round_trips_big_sequence_numbers(table: Table) -> None:
    """A 56-digit sequence number and its subsequence survive the table exactly."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await table.store.take(await _one(table.store, "s-1"), "w1")
    done = await table.store.checkpoint(mine, Position(BIG, 7))
    assert done.checkpoint == Position(BIG, 7)
    assert done.counter == mine.counter + 1
    assert done.owner_switches == 0
    stored = await _one(table.store, "s-1")
    assert stored.checkpoint == Position(BIG, 7)
    with pytest.raises(LeaseLostError):
        await table.store.checkpoint(mine, Position(BIG + 1))
    ended = await table.store.checkpoint(done, Sentinel.SHARD_END)
    assert ended.finished


async def test_a_checkpoint_carries_the_shards_load_and_lag(table: Table) -> None:
    """The owner's measured throughput (KCL 3.x's throughputKBps) and its lag ride on
    its checkpoint and stay until the next measured ones."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await table.store.take(await _one(table.store, "s-1"), "w1")
    assert mine.load is None
    done = await table.store.checkpoint(mine, Position(1), ShardLoad(250.5, 48.25), 1200)
    assert done.load == ShardLoad(250.5, 48.25)
    assert done.lag_ms == 1200
    again = await table.store.checkpoint(done, Position(2))
    assert again.load == ShardLoad(250.5, 48.25)
    stored = await _one(table.store, "s-1")
    assert stored.load == ShardLoad(250.5, 48.25)
    assert stored.lag_ms == 1200


async def test_handoff_request_transfer_and_take(table: Table) -> None:
    """A steal is a request the owner sees on renewal and answers with a transfer."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await table.store.take(await _one(table.store, "s-1"), "w1")
    observed = await _one(table.store, "s-1")
    assert await table.store.request_handoff(observed, "w2")
    assert not await table.store.request_handoff(observed, "w3")
    renewed = await table.store.renew(mine)
    assert renewed.handoff_to == "w2"
    await table.store.transfer(renewed, "w2")
    given = await _one(table.store, "s-1")
    assert (given.owner, given.handoff_to, given.counter) == ("w2", None, renewed.counter + 1)
    with pytest.raises(LeaseLostError):
        await table.store.renew(renewed)
    taken = await table.store.take(given, "w2")
    assert taken.owner == "w2"


async def test_a_request_asked_before_the_named_owner_takes_the_lease_stands(
    table: Table,
) -> None:
    """The leader gives a lease (names its owner) and, before that worker takes it,
    asks a hand-off: the take keeps the request and its acknowledgement (dropped, the
    leader would count a move that never comes). A take by a new owner drops them."""
    store = table.store
    await store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    given = await store.take(await _one(store, "s-1"), "w1")  # the leader gives it to w1
    assert await store.request_handoff(given, "w2")
    assert await store.acknowledge("s-1", "w2")
    taken = await store.take(given, "w1")  # w1 takes what it was given, read before
    assert (taken.owner, taken.handoff_to, taken.handoff_ack) == ("w1", "w2", "w2")
    assert taken.owner_switches == given.owner_switches
    assert await _one(store, "s-1") == taken
    moved = await store.take(taken, "w3")  # a new owner: the request is void
    assert (moved.owner, moved.handoff_to, moved.handoff_ack) == ("w3", None, None)
    assert (await _one(store, "s-1")).handoff_to is None


async def test_a_request_stands_on_a_busy_owner_but_not_on_a_new_one(table: Table) -> None:
    """A hand-off request asked from a read the owner's checkpoints have since passed
    is written (a busy shard checkpoints several times a second, and a request that
    had to match the counter lost that race on every pass); once another worker owns
    the lease, the request is refused."""
    store = table.store
    await store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await store.take(await _one(store, "s-1"), "w1")
    observed = await _one(store, "s-1")
    moved_on = await store.checkpoint(mine, Position(5))
    assert moved_on.counter > observed.counter
    assert await store.request_handoff(observed, "w2")
    asked = await _one(store, "s-1")
    assert (asked.owner, asked.counter, asked.handoff_to) == ("w1", moved_on.counter, "w2")
    assert (await store.renew(moved_on)).handoff_to == "w2"  # the request fences nothing
    assert await store.withdraw("s-1", "w2")

    taken = await store.take(await _one(store, "s-1"), "w3")
    assert not await store.request_handoff(observed, "w2")  # w1 is no longer the owner
    assert (await _one(store, "s-1")).handoff_to is None
    await store.release(taken)
    assert not await store.request_handoff(taken, "w2")  # nobody owns it: take it instead


async def test_a_withdrawn_request_refuses_the_transfer(table: Table) -> None:
    """A receiver that stops withdraws its request (and acknowledgement); a transfer
    after that is refused with the lease unchanged, so its owner releases it instead.
    A transfer first makes the withdrawal fail: the lease is the receiver's."""
    store = table.store
    for key in ("s-1", "s-2"):
        await store.create_lease(key, set(), Sentinel.TRIM_HORIZON)
    first = await store.take(await _one(store, "s-1"), "w1")
    assert await store.request_handoff(first, "w2")
    assert await store.acknowledge("s-1", "w2")
    assert not await store.withdraw("s-1", "w3")  # only the one named may withdraw
    assert await store.withdraw("s-1", "w2")
    left = await _one(store, "s-1")
    assert (left.owner, left.counter, left.handoff_to, left.handoff_ack) == (
        "w1",
        first.counter,
        None,
        None,
    )
    assert not await store.transfer(first, "w2")
    assert await _one(store, "s-1") == left
    await store.release(first)  # the counter is the one the owner knows
    assert (await _one(store, "s-1")).owner is None

    second = await store.take(await _one(store, "s-2"), "w1")
    assert await store.request_handoff(second, "w2")
    assert await store.transfer(second, "w2")
    assert not await store.withdraw("s-2", "w2")
    assert (await _one(store, "s-2")).owner == "w2"
    # A stale owner's transfer is a lost lease, not a withdrawal.
    with pytest.raises(LeaseLostError):
        await store.transfer(second, "w2")


async def test_release_clears_the_owner(table: Table) -> None:
    """A released lease has no owner and can be taken at once by anyone."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    mine = await table.store.take(await _one(table.store, "s-1"), "w1")
    await table.store.release(mine)
    free = await _one(table.store, "s-1")
    assert free.owner is None
    assert free.counter == mine.counter + 1
    assert (await table.store.take(free, "w2")).owner == "w2"


async def test_deleted_lease_and_table_fence_the_old_owner(table: Table) -> None:
    """After the lease or the whole table is deleted, the old owner's writes fail."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    await table.store.create_lease("s-2", set(), Sentinel.TRIM_HORIZON)
    one = await table.store.take(await _one(table.store, "s-1"), "w1")
    two = await table.store.take(await _one(table.store, "s-2"), "w1")
    await table.store.delete_lease("s-1")
    with pytest.raises(LeaseLostError):
        await table.store.renew(one)
    await table.drop()
    with pytest.raises(LeaseLostError):
        await table.store.checkpoint(two, Position(1))
    with pytest.raises(TableMissingError):
        await table.store.list_leases()
    await table.store.ensure_table()
    assert await table.store.list_leases() == []


async def test_a_lease_made_again_fences_the_old_owner_at_the_same_counter(table: Table) -> None:
    """A table deleted and made again holds new leases whose counters may match the old
    ones exactly: the incarnation written at creation tells them apart, and every fenced
    write of the old lease is refused. The new lease takes writes as usual."""
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    old = await table.store.take(await _one(table.store, "s-1"), "w1")
    await table.drop()
    await table.store.ensure_table()
    await table.store.create_lease("s-1", set(), Sentinel.TRIM_HORIZON)
    new = await table.store.take(await _one(table.store, "s-1"), "w1")
    assert (new.owner, new.counter) == (old.owner, old.counter)
    assert None is not new.incarnation != old.incarnation is not None
    with pytest.raises(LeaseLostError):
        await table.store.checkpoint(old, Position(1))
    with pytest.raises(LeaseLostError):
        await table.store.release(old)
    assert (await table.store.checkpoint(new, Position(2))).checkpoint == Position(2)
    assert (await _one(table.store, "s-1")).incarnation == new.incarnation


@pytest.mark.emulator
async def test_kcl_null_owner_is_read_as_unowned(aws_clients: Clients) -> None:
    """A KCL table's literal "NULL" owner is adopted as a free lease."""
    client = aws_clients.dynamodb
    name = f"kcl-{uuid.uuid4().hex[:12]}"
    store = DynamoLeaseStore(client, name)
    await store.ensure_table()
    await client.put_item(
        TableName=name,
        Item={
            "leaseKey": {"S": "shardId-000000000000"},
            "leaseOwner": {"S": "NULL"},
            "leaseCounter": {"N": "42"},
            "checkpoint": {"S": str(BIG)},
            "checkpointSubSequenceNumber": {"N": "0"},
            "ownerSwitchesSinceCheckpoint": {"N": "3"},
        },
    )
    (lease,) = await store.list_leases()
    assert lease.owner is None
    assert lease.checkpoint == Position(BIG)
    assert lease.incarnation is None  # KCL writes none; the lander's writes need none
    taken = await store.take(lease, "w1")
    assert (taken.owner, taken.counter) == ("w1", 43)
    assert (await store.checkpoint(taken, Position(BIG + 1))).incarnation is None


@pytest.mark.emulator
async def test_a_kcl_3_table_is_adopted_leases_only(aws_clients: Clients) -> None:
    """KCL 3.5+ keeps its leader lock, migration state and worker metrics in the lease
    table, marked by ``entityType``: only the leases are read as leases. A KCL lease
    with its 3.x attributes (throughput, hash range, a graceful hand-off left half-done)
    is taken, and the take clears the stale hand-off."""
    client = aws_clients.dynamodb
    name = f"kcl3-{uuid.uuid4().hex[:12]}"
    store = DynamoLeaseStore(client, name)
    await store.ensure_table()
    lease_item = {
        "leaseKey": {"S": "shardId-000000000001"},
        "leaseOwner": {"S": "kcl-worker-b"},
        "checkpointOwner": {"S": "kcl-worker-a"},
        "leaseCounter": {"N": "7"},
        "checkpoint": {"S": str(BIG)},
        "checkpointSubSequenceNumber": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "1"},
        "startingHashKey": {"S": "0"},
        "endingHashKey": {"S": str(2**128 - 1)},
        "throughputKBps": {"N": "12.5"},
        "entityType": {"S": "LEASE"},
    }
    others = [
        {
            "leaseKey": {"S": "Leader"},
            "ownerName": {"S": "kcl-worker-a"},
            "entityType": {"S": "LEADER"},
        },
        {
            "leaseKey": {"S": "Migration3.0"},
            "cv": {"S": "CLIENT_VERSION_3X"},
            "entityType": {"S": "CLIENT_VERSION_MIGRATION"},
        },
        {
            "leaseKey": {"S": "kcl-worker-a"},
            "lut": {"N": "1790000000"},
            "entityType": {"S": "WORKER_METRIC_STATS"},
        },
        {
            "leaseKey": {"S": "shardId-000000000000"},
            "leaseCounter": {"N": "3"},
            "checkpoint": {"S": "SHARD_END"},
        },
    ]
    for item in [lease_item, *others]:
        await client.put_item(TableName=name, Item=item)

    leases = {lease.key: lease for lease in await store.list_leases()}
    assert set(leases) == {"shardId-000000000000", "shardId-000000000001"}
    lease = leases["shardId-000000000001"]
    assert (lease.owner, lease.counter, lease.checkpoint) == ("kcl-worker-b", 7, Position(BIG))
    taken = await store.take(lease, "w1")
    assert (taken.owner, taken.counter) == ("w1", 8)
    raw = (await client.get_item(TableName=name, Key={"leaseKey": {"S": lease.key}}))["Item"]
    assert "checkpointOwner" not in raw
    assert raw["throughputKBps"] == {"N": "12.5"}  # KCL's own attributes are left alone
