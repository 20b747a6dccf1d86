"""Shard sync: one lease per shard, created once, even when every worker syncs at once."""

from __future__ import annotations

from collections.abc import Set

from consumer.leases.keys import StreamId, lease_key
from consumer.leases.memory import MemoryLeaseStore
from consumer.sequence import Checkpoint, Sentinel
from consumer.stream.memory import MemoryStream
from consumer.stream.shards import CREATE_BATCH, ShardSyncer


class CountingStore(MemoryLeaseStore):
    """Remembers every lease creation asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.creates: list[str] = []

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        self.creates.append(key)
        return await super().create_lease(key, parents, checkpoint)


async def test_a_fresh_table_gets_a_lease_for_every_shard() -> None:
    store = MemoryLeaseStore()
    await store.ensure_table()
    syncer = ShardSyncer(MemoryStream(4), store, Sentinel.TRIM_HORIZON)
    listed = await syncer.sync(await store.list_leases())
    assert len(listed) == 4
    assert {lease.key for lease in await store.list_leases()} == listed
    assert not syncer.incomplete


async def test_a_lease_another_worker_created_first_leaves_the_rest_to_it() -> None:
    """The second worker's view is stale (it read the table before the first created
    anything): its first refused creation ends its pass, and a later pass with a fresh
    view creates what is still missing."""
    stream = MemoryStream(4)
    store = CountingStore()
    await store.ensure_table()
    first = sorted(shard.shard_id for shard in await stream.list_shards())[0]
    assert await store.create_lease(first, frozenset(), Sentinel.TRIM_HORIZON)
    creates = store.creates
    creates.clear()
    syncer = ShardSyncer(stream, store, Sentinel.TRIM_HORIZON)
    await syncer.sync([])  # stale: it saw no lease
    assert creates == [first]
    assert syncer.incomplete
    assert len(await store.list_leases()) == 1

    await syncer.sync(await store.list_leases())
    assert len(creates) == 4  # the three still missing, once each
    assert len(await store.list_leases()) == 4
    assert not syncer.incomplete


async def test_a_refused_batch_ends_the_pass() -> None:
    """Creating in batches (one creator, board coordination), a batch with a refusal
    is the last one tried."""
    stream = MemoryStream(CREATE_BATCH * 3)
    store = CountingStore()
    await store.ensure_table()
    first = sorted(shard.shard_id for shard in await stream.list_shards())[0]
    assert await store.create_lease(first, frozenset(), Sentinel.TRIM_HORIZON)
    store.creates.clear()
    syncer = ShardSyncer(stream, store, Sentinel.TRIM_HORIZON, batch=CREATE_BATCH)
    await syncer.sync([])
    assert len(store.creates) == CREATE_BATCH
    assert syncer.incomplete
    await syncer.sync(await store.list_leases())
    assert len(await store.list_leases()) == CREATE_BATCH * 3
    assert not syncer.incomplete


async def test_streams_sharing_a_table_keep_to_their_own_leases() -> None:
    """Keys carry the stream, parents too; one stream's sync neither counts another's
    leases as its own nor deletes them."""
    a, b = StreamId("123456789012", "a", 1), StreamId("123456789012", "b", 2)
    stream_a, stream_b = MemoryStream(1), MemoryStream(1)
    left, right = stream_a.split("shardId-000000000000", 2**127)
    store = MemoryLeaseStore()
    await store.ensure_table()
    sync_a = ShardSyncer(stream_a, store, Sentinel.LATEST, stream_id=a)
    sync_b = ShardSyncer(stream_b, store, Sentinel.TRIM_HORIZON, stream_id=b)
    listed_a = await sync_a.sync(await store.list_leases())
    listed_b = await sync_b.sync(await store.list_leases())
    assert listed_a == {lease_key(a, s) for s in ("shardId-000000000000", left, right)}
    assert listed_b == {lease_key(b, "shardId-000000000000")}
    leases = {lease.key: lease for lease in await store.list_leases()}
    assert set(leases) == listed_a | listed_b
    assert leases[lease_key(a, left)].parents == {lease_key(a, "shardId-000000000000")}
    assert leases[lease_key(a, "shardId-000000000000")].checkpoint is Sentinel.LATEST
    assert leases[lease_key(b, "shardId-000000000000")].checkpoint is Sentinel.TRIM_HORIZON
    # A sync finds nothing of its own missing, and never touches the other's leases.
    store_before = dict(leases)
    assert await sync_a.sync(list(leases.values())) == listed_a
    assert not sync_a.changed
    assert {lease.key: lease for lease in await store.list_leases()} == store_before
