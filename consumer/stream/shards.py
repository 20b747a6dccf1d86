"""Shard discovery and lineage: a lease for every shard, parents before children.

After a split or merge, the children's leases start at TRIM_HORIZON whatever the
configured initial position, since every record of a child follows its parents' and
skipping any would lose data; children are only *processed* once every parent is
done (see :func:`consumer.leases.decisions.ready_keys`). On a fresh (or rebuilt)
table every lease starts at the configured initial position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Set
from dataclasses import dataclass

import structlog

from consumer.leases.keys import StreamId, lease_key, split_key
from consumer.leases.model import Lease
from consumer.leases.store import LeaseStore
from consumer.sequence import Checkpoint, Sentinel
from consumer.stream import Shard, StreamClient

log = structlog.get_logger("consumer.stream.shards")

CREATE_BATCH = 16
"""Lease creations in flight at once (the leader creates them all): a new table of 1,000
shards is made in 63 round trips, not 1,000."""


@dataclass(frozen=True, slots=True)
class NewLease:
    """A lease to create."""

    key: str
    parents: frozenset[str]
    checkpoint: Checkpoint


def parents_first(shards: Iterable[Shard]) -> list[Shard]:
    """Order shards so every parent that is listed comes before its children."""
    by_id = {shard.shard_id: shard for shard in shards}
    ordered: list[Shard] = []
    placed: set[str] = set()

    def place(shard: Shard, path: frozenset[str]) -> None:
        if shard.shard_id in placed or shard.shard_id in path:
            return
        for parent in sorted(shard.parents):
            if parent in by_id:
                place(by_id[parent], path | {shard.shard_id})
        placed.add(shard.shard_id)
        ordered.append(shard)

    for shard in sorted(by_id.values(), key=lambda s: s.shard_id):
        place(shard, frozenset())
    return ordered


def plan_new_leases(
    shards: Iterable[Shard], existing: Set[str], initial: Sentinel
) -> list[NewLease]:
    """Leases to create for shards that have none, parents first.

    A new shard descending from a shard that already had a lease was born by
    resharding while the stream was being consumed: it starts at TRIM_HORIZON.
    """
    from_known: set[str] = set(existing)
    plan: list[NewLease] = []
    for shard in parents_first(shards):
        if shard.shard_id in existing:
            continue
        inherits = any(parent in from_known for parent in shard.parents)
        if inherits:
            from_known.add(shard.shard_id)
        start = Sentinel.TRIM_HORIZON if inherits else initial
        plan.append(NewLease(shard.shard_id, shard.parents, start))
    return plan


def leases_to_delete(leases: Iterable[Lease], listed: Set[str]) -> list[str]:
    """Finished leases of shards the stream no longer lists (trimmed): garbage."""
    return [lease.key for lease in leases if lease.finished and lease.key not in listed]


class ShardSyncer:
    """Lists the stream's shards and keeps the lease table in step with them.

    Only the leader syncs. A batch in which another worker got to a creation first (the
    leader before it, still creating) ends the pass: the rest are left to it, and
    :attr:`incomplete` asks for another pass soon, in case it stopped half-way.
    """

    def __init__(
        self,
        stream: StreamClient,
        store: LeaseStore,
        initial: Sentinel,
        *,
        batch: int = 1,
        stream_id: StreamId | None = None,
    ) -> None:
        self.batch = batch
        self.stream_id = stream_id
        """The stream whose leases this syncer keeps (None: a single-stream table, keyed
        by shard id alone)."""
        self.stream = stream
        self.store = store
        self.initial = initial
        self.incomplete = False
        """The last pass left leases it found missing to another worker."""
        self.changed = False
        """The last pass created or deleted a lease."""

    async def sync(self, leases: list[Lease]) -> set[str]:
        """Create missing leases and delete garbage; returns the lease keys of the
        listed shards (their shard ids in a single-stream table).

        ``leases`` may hold other streams' leases: only this stream's are compared.
        """
        shards = await self.stream.list_shards()
        listed = {shard.shard_id for shard in shards}
        mine = {shard: lease for lease in leases if (shard := self._shard_of(lease.key))}
        self.incomplete = False
        self.changed = False
        plan = [
            NewLease(
                lease_key(self.stream_id, n.key),
                frozenset(lease_key(self.stream_id, p) for p in n.parents),
                n.checkpoint,
            )
            for n in plan_new_leases(shards, set(mine), self.initial)
        ]
        for start in range(0, len(plan), self.batch):
            batch = plan[start : start + self.batch]
            made = await asyncio.gather(
                *(self.store.create_lease(n.key, n.parents, n.checkpoint) for n in batch)
            )
            for new, created in zip(batch, made, strict=True):
                if created:
                    self.changed = True
                    log.info(
                        "lease created",
                        shard_id=new.key,
                        parents=sorted(new.parents),
                        checkpoint=str(new.checkpoint),
                    )
            if not all(made):
                self.incomplete = True
                log.debug("leases created by another worker; leaving the rest to it")
                break
        by_shard = [lease.evolve(key=shard) for shard, lease in mine.items()]
        for shard in leases_to_delete(by_shard, listed):
            await self.store.delete_lease(mine[shard].key)
            self.changed = True
            log.info("lease of trimmed shard deleted", shard_id=mine[shard].key)
        return {lease_key(self.stream_id, shard) for shard in listed}

    def _shard_of(self, key: str) -> str | None:
        """The shard id of a lease of this stream (None: another stream's lease)."""
        try:
            stream, shard = split_key(key)
        except ValueError:
            return None
        return shard if stream == self.stream_id else None
