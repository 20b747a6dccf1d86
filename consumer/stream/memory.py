"""An in-memory Kinesis stream for fast tests of code that reads one.

It keeps the :class:`~consumer.stream.StreamClient` contract (the same contract tests
run against it and against Kinesis on the emulator): hash-key routing of partition
keys, 56-digit sequence numbers, split and merge with parent ids, closed shards that
end, LATEST/AT_SEQUENCE_NUMBER/AT_TIMESTAMP iterators. On top it can expire every
iterator and inject errors, which no emulator does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from consumer.sequence import Sentinel
from consumer.stream import (
    IteratorExpiredError,
    KinesisRecord,
    RecordsPage,
    Shard,
    StartAt,
    StreamError,
    StreamNotFoundError,
)

MAX_HASH = 2**128 - 1
SEQUENCE_BASE = 49_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000


@dataclass
class _Shard:
    shard_id: str
    start_hash: int
    end_hash: int
    parents: frozenset[str] = frozenset()
    records: list[KinesisRecord] = field(default_factory=list)
    closed: bool = False


class MemoryStream:
    """A stream in a dict; every method is atomic (no await between read and write)."""

    def __init__(self, shards: int = 1, clock: datetime | None = None) -> None:
        self._shards: dict[str, _Shard] = {}
        self._next_shard = 0
        self._next_sequence = 0
        self._generation = 0
        self.faults: list[StreamError] = []
        """Errors to raise, in order, from the next get_records calls."""
        self.get_records_calls = 0
        self.now = clock
        width = (MAX_HASH + 1) // shards
        for index in range(shards):
            end = MAX_HASH if index == shards - 1 else (index + 1) * width - 1
            self._new_shard(index * width, end)

    def _new_shard(self, start: int, end: int, parents: frozenset[str] = frozenset()) -> _Shard:
        shard = _Shard(f"shardId-{self._next_shard:012d}", start, end, parents)
        self._next_shard += 1
        self._shards[shard.shard_id] = shard
        return shard

    # -- producing and resharding (test controls) ------------------------------------

    def put(
        self,
        data: bytes,
        partition_key: str,
        explicit_hash_key: int | None = None,
        arrival: datetime | None = None,
    ) -> tuple[str, int]:
        """Append a record to the open shard owning its hash key; (shard, sequence)."""
        hashed = (
            explicit_hash_key
            if explicit_hash_key is not None
            else int.from_bytes(hashlib.md5(partition_key.encode()).digest(), "big")
        )
        shard = next(
            s
            for s in self._shards.values()
            if not s.closed and s.start_hash <= hashed <= s.end_hash
        )
        self._next_sequence += 1
        sequence = SEQUENCE_BASE + self._next_sequence * 10**6
        shard.records.append(
            KinesisRecord(
                sequence=sequence,
                partition_key=partition_key,
                data=data,
                arrival=arrival or self.now or datetime.now(UTC),
            )
        )
        return shard.shard_id, sequence

    def split(self, shard_id: str, new_starting_hash_key: int) -> tuple[str, str]:
        """Close a shard and open two children splitting its hash range."""
        parent = self._open(shard_id)
        if not parent.start_hash < new_starting_hash_key <= parent.end_hash:
            raise ValueError("new starting hash key outside the shard's range")
        parent.closed = True
        left = self._new_shard(parent.start_hash, new_starting_hash_key - 1, frozenset({shard_id}))
        right = self._new_shard(new_starting_hash_key, parent.end_hash, frozenset({shard_id}))
        return left.shard_id, right.shard_id

    def merge(self, shard_id: str, adjacent_id: str) -> str:
        """Close two adjacent shards and open one child over both ranges."""
        first, second = sorted(
            (self._open(shard_id), self._open(adjacent_id)), key=lambda s: s.start_hash
        )
        if first.end_hash + 1 != second.start_hash:
            raise ValueError("shards are not adjacent")
        first.closed = second.closed = True
        child = self._new_shard(
            first.start_hash, second.end_hash, frozenset({shard_id, adjacent_id})
        )
        return child.shard_id

    def expire_iterators(self) -> None:
        """Make every iterator handed out so far expired."""
        self._generation += 1

    def _open(self, shard_id: str) -> _Shard:
        shard = self._shards.get(shard_id)
        if shard is None or shard.closed:
            raise ValueError(f"{shard_id} is not an open shard")
        return shard

    # -- the StreamClient contract -----------------------------------------------------

    async def list_shards(self) -> list[Shard]:
        """Every shard, parents and closed flag included."""
        return [Shard(s.shard_id, s.parents, s.closed) for s in self._shards.values()]

    def shard(self, shard_id: str) -> _Shard | None:
        """A shard by id (None if there is none)."""
        return self._shards.get(shard_id)

    def children(self, shard_id: str) -> list[_Shard]:
        """The shards born of ``shard_id`` by a split or merge."""
        return [s for s in self._shards.values() if shard_id in s.parents]

    async def get_iterator(self, shard_id: str, start: StartAt) -> str:
        """An opaque iterator: shard, index, generation."""
        shard = self._shards.get(shard_id)
        if shard is None:
            raise StreamNotFoundError(shard_id)
        return f"{shard_id}|{self.index_at(shard, start)}|{self._generation}"

    @staticmethod
    def index_at(shard: _Shard, start: StartAt) -> int:
        """The index in ``shard.records`` where ``start`` begins."""
        if start.position is not None:
            index = next(
                (i for i, r in enumerate(shard.records) if r.sequence >= start.position.sequence),
                len(shard.records),
            )
        elif start.kind is Sentinel.LATEST:
            index = len(shard.records)
        elif start.kind is Sentinel.AT_TIMESTAMP:
            assert start.timestamp is not None
            index = next(
                (i for i, r in enumerate(shard.records) if r.arrival >= start.timestamp),
                len(shard.records),
            )
        else:
            index = 0
        return index

    async def get_records(self, iterator: str, limit: int) -> RecordsPage:
        """Records from the iterator; None as next iterator past a closed shard's end."""
        self.get_records_calls += 1
        if self.faults:
            raise self.faults.pop(0)
        shard_id, index_text, generation = iterator.split("|")
        if int(generation) != self._generation:
            raise IteratorExpiredError(iterator)
        shard = self._shards[shard_id]
        index = int(index_text)
        records = shard.records[index : index + limit]
        after = index + len(records)
        behind = 0 if after >= len(shard.records) else 1000
        if shard.closed and after >= len(shard.records) and not records:
            return RecordsPage([], None, 0)
        return RecordsPage(records, f"{shard_id}|{after}|{self._generation}", behind)
