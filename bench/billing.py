"""What the lease table would cost on DynamoDB: item sizes, units, and KCL's defaults.

:class:`BilledLeaseStore` is the in-memory lease table billing each call as DynamoDB
bills it: item sizes from the attributes :class:`consumer.leases.dynamo.DynamoLeaseStore`
writes, 4 KB read units (a strongly consistent read 1 unit, an eventually consistent
one half), 1 KB write units, conditional writes billed whether they succeed or not.
Every call also takes :data:`LATENCY` of (simulated) time, so that workers calling it
interleave as they do over a network. :func:`kcl_costs` computes what KCL 2.x and 3.x
cost under their defaults with the same units. Used by :mod:`bench.scale`.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Coroutine, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, cast

from consumer.leases.board import BOARD_KEY, Board
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import WORKER_KEY_PREFIX, Lease, ShardLoad, ShardReport
from consumer.leases.store import Expect
from consumer.sequence import Checkpoint, checkpoint_to_item

READ_UNIT, WRITE_UNIT, SCAN_PAGE = 4096, 1024, 1 << 20
LATENCY = 0.005
"""Simulated seconds each lease-table call takes (DynamoDB's typical single-digit ms), so
that workers' calls interleave as they do over a network; a Scan takes one more such
latency per 100 KB it reads."""


def _number(value: int) -> int:
    """Bytes DynamoDB counts for a number: about one per two significant digits, plus one."""
    return (len(str(abs(value))) + 1) // 2 + 1


def item_bytes(lease: Lease) -> int:
    """The size DynamoDB bills for ``lease``'s item, attribute names included, as
    :class:`consumer.leases.dynamo.DynamoLeaseStore` writes it."""
    value, sub = checkpoint_to_item(lease.checkpoint)
    size = len("leaseKey") + len(lease.key.encode())
    size += len("leaseCounter") + _number(lease.counter)
    size += len("checkpoint") + len(value)
    size += len("checkpointSubSequenceNumber") + _number(sub)
    size += len("ownerSwitchesSinceCheckpoint") + _number(lease.owner_switches)
    if lease.owner is not None:
        size += len("leaseOwner") + len(lease.owner.encode())
    if lease.parents:
        size += len("parentShardId") + sum(len(p.encode()) for p in lease.parents)
    if lease.handoff_to is not None:
        size += len("handoffTo") + len(lease.handoff_to.encode())
    if lease.load is not None:
        size += len("throughputKBps") + 4 + len("recordsPerSecond") + 4
    if lease.handoff_ack is not None:
        size += len("handoffAck") + len(lease.handoff_ack.encode())
    if lease.updated_ms is not None:
        size += len("lastUpdateMs") + _number(lease.updated_ms)
    if lease.lag_ms is not None:
        size += len("millisBehindLatest") + _number(lease.lag_ms)
    if lease.report is not None:
        report = lease.report
        size += len("pendingRecords") + _number(report.pending)
        size += len("checkpointAgeMs") + _number(report.checkpoint_age_ms)
        size += len("shardFailures") + _number(report.failures)
        if report.last_error:
            size += len("lastError") + len(report.last_error.encode())
    return size


def board_bytes(board: Board | None) -> int:
    """The size DynamoDB bills for the board item, as
    :class:`consumer.leases.dynamo_board.DynamoBoard` writes it (3 bytes per map or
    list entry, one per boolean)."""
    if board is None:
        return 0
    size = len("leaseKey") + len(BOARD_KEY) + len("joins") + _number(board.joins) + len("slots")
    for worker, slot in board.slots.items():
        size += len(worker.encode()) + 3
        size += 5 + _number(slot.counter) + _number(slot.joined) + _number(slot.notices)
        size += _number(slot.held) + 2 + 3 + sum(len(k) + 3 for k in slot.incoming)
        size += 2 if slot.fenced else 0
        size += 1 + _number(round(slot.cpu * 10))
        size += 1 + _number(slot.beat_ms) if slot.beat_ms is not None else 0
        size += 4 + len(slot.instance) if slot.instance is not None else 0
        size += 4 + len(slot.address) if slot.address is not None else 0
    return size


def index_bytes(key: str, owner: str) -> int:
    """One entry of the keys-only owner index."""
    return len("leaseKey") + len(key) + len("leaseOwner") + len(owner)


@dataclass
class Bill:
    """Calls by kind and the units they cost, from some moment on."""

    calls: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0

    def minus(self, before: Bill) -> Bill:
        """What was billed since ``before`` (a copy taken earlier)."""
        return Bill(
            self.calls - before.calls,
            self.read_units - before.read_units,
            self.write_units - before.write_units,
        )

    def copy(self) -> Bill:
        """A snapshot."""
        return Bill(Counter(self.calls), self.read_units, self.write_units)


class BilledLeaseStore(MemoryLeaseStore):
    """The in-memory lease table, billing each call as DynamoDB would."""

    def __init__(self) -> None:
        super().__init__()
        self.bill = Bill()
        self._sizes: dict[str, int] = {}
        self._owners: dict[str, str] = {}
        self._board_size = 0
        self._total = 0

    def _resize(self, key: str) -> int:
        """Record the item's size after a write; the larger of before and after."""
        before = self._sizes.get(key, 0)
        lease = (self.leases or {}).get(key)
        after = item_bytes(lease) if lease is not None else 0
        if lease is None:
            self._sizes.pop(key, None)
        else:
            self._sizes[key] = after
        self._total += after - before
        return max(before, after)

    def _write(self, name: str, key: str, ok: bool) -> None:
        size = self._board_resize() if key == BOARD_KEY else self._resize(key)
        self.bill.calls[name if ok else f"{name} (condition failed)"] += 1
        self.bill.write_units += max(1, math.ceil(size / WRITE_UNIT))
        if key != BOARD_KEY:
            self._index_write(key)

    def _board_resize(self) -> int:
        before, after = self._board_size, board_bytes(self.board)
        self._board_size = after
        self._total += after - before
        return max(before, after)

    def _index_write(self, key: str) -> None:
        """The owner index is written when an item's owner changes: a delete of the
        old entry and a put of the new one, one write unit each."""
        lease = (self.leases or {}).get(key)
        owner = None if lease is None else lease.owner
        previous = self._owners.get(key)
        if owner == previous:
            return
        changes = (previous is not None) + (owner is not None)
        self.bill.calls["owner index write"] += changes
        self.bill.write_units += changes
        if owner is None:
            self._owners.pop(key, None)
        else:
            self._owners[key] = owner

    async def _billed(self, name: str, key: str, call: Coroutine[Any, Any, Any]) -> Any:
        try:
            await asyncio.sleep(LATENCY)
        except BaseException:
            call.close()  # cancelled on the way: the call is never made
            raise
        try:
            result = await call
        except Exception:
            self._write(name, key, ok=False)
            raise
        self._write(name, key, ok=result is not False)
        return result

    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        """A Scan of every item (the lander's own items included, as DynamoDB reads and
        bills them before the store drops them); eventually consistent at half price."""
        await asyncio.sleep(LATENCY * (1 + self._total / 100_000))
        found = await super().list_leases()
        pages = max(1, math.ceil(self._total / SCAN_PAGE))
        self.bill.calls["Scan (strong)" if consistent else "Scan (eventual)"] += pages
        units = max(1, math.ceil(self._total / READ_UNIT))
        self.bill.read_units += units if consistent else units / 2
        return found

    async def owned_by(self, owner: str) -> list[str]:
        """A Query of the keys-only owner index (eventually consistent)."""
        await asyncio.sleep(LATENCY)
        found = await super().owned_by(owner)
        self.bill.calls["Query owner index"] += 1
        size = sum(index_bytes(key, owner) for key in found)
        self.bill.read_units += max(1, math.ceil(size / READ_UNIT)) / 2
        return found

    async def read_board(self) -> Board:
        """A strongly consistent GetItem of the board."""
        await asyncio.sleep(LATENCY)
        found = await super().read_board()
        self.bill.calls["GetItem board (strong)"] += 1
        self.bill.read_units += max(1, math.ceil(self._board_size / READ_UNIT))
        return found

    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Board:
        """GetItem of the board, then the conditional write of the new slot."""
        await self.read_board()
        call = super().join(worker, instance, expect=expect, address=address)
        return cast("Board", await self._billed("UpdateItem board join", BOARD_KEY, call))

    async def beat(
        self, worker: str, counter: int, *, held: int, leaving: bool, read: int, cpu: float = 0.0
    ) -> Board:
        """UpdateItem on the board, returning it (no read units: ALL_NEW is free)."""
        call = super().beat(worker, counter, held=held, leaving=leaving, read=read, cpu=cpu)
        return cast("Board", await self._billed("UpdateItem board beat", BOARD_KEY, call))

    async def fence(self, worker: str, counter: int) -> bool:
        call = super().fence(worker, counter)
        return cast("bool", await self._billed("UpdateItem board fence", BOARD_KEY, call))

    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        call = super().deliver(worker, keys)
        return cast("bool", await self._billed("UpdateItem board deliver", BOARD_KEY, call))

    async def notify(self, worker: str) -> bool:
        call = super().notify(worker)
        return cast("bool", await self._billed("UpdateItem board notice", BOARD_KEY, call))

    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        call = super().remove_slot(worker, counter=counter)
        return cast("bool", await self._billed("UpdateItem board remove", BOARD_KEY, call))

    async def get_lease(self, key: str) -> Lease | None:
        """A strongly consistent GetItem."""
        await asyncio.sleep(LATENCY)
        found = await super().get_lease(key)
        self.bill.calls["GetItem (strong)"] += 1
        self.bill.read_units += max(1, math.ceil(self._sizes.get(key, 0) / READ_UNIT))
        return found

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        return cast(
            "bool",
            await self._billed(
                "PutItem create", key, super().create_lease(key, parents, checkpoint)
            ),
        )

    async def take(self, lease: Lease, owner: str) -> Lease:
        return cast(
            "Lease", await self._billed("UpdateItem take", lease.key, super().take(lease, owner))
        )

    async def renew(
        self, lease: Lease, lag_ms: int | None = None, report: ShardReport | None = None
    ) -> Lease:
        name = (
            "UpdateItem renew (worker id)"
            if lease.key.startswith(WORKER_KEY_PREFIX)
            else "UpdateItem renew"
        )
        return cast(
            "Lease", await self._billed(name, lease.key, super().renew(lease, lag_ms, report))
        )

    async def checkpoint(
        self,
        lease: Lease,
        checkpoint: Checkpoint,
        load: ShardLoad | None = None,
        lag_ms: int | None = None,
    ) -> Lease:
        call = super().checkpoint(lease, checkpoint, load, lag_ms)
        return cast("Lease", await self._billed("UpdateItem checkpoint", lease.key, call))

    async def request_handoff(self, lease: Lease, to: str, *, replacing: str | None = None) -> bool:
        call = super().request_handoff(lease, to, replacing=replacing)
        return cast("bool", await self._billed("UpdateItem hand-off request", lease.key, call))

    async def acknowledge(self, key: str, to: str) -> bool:
        call = super().acknowledge(key, to)
        return cast("bool", await self._billed("UpdateItem hand-off ack", key, call))

    async def withdraw(self, key: str, to: str) -> bool:
        call = super().withdraw(key, to)
        return cast("bool", await self._billed("UpdateItem hand-off withdrawal", key, call))

    async def transfer(self, lease: Lease, to: str) -> bool:
        call = super().transfer(lease, to)
        return cast("bool", await self._billed("UpdateItem transfer", lease.key, call))

    async def release(self, lease: Lease) -> None:
        await self._billed("UpdateItem release", lease.key, super().release(lease))

    async def delete_lease(self, key: str) -> None:
        await self._billed("DeleteItem", key, super().delete_lease(key))


# -- KCL's defaults, with the same billing ----------------------------------------------


@dataclass(frozen=True)
class KclDefaults:
    """KCL 2.x's default timings (milliseconds), as its config classes declare them."""

    failover_ms: float = 10_000
    epsilon_ms: float = 25
    shard_sync_ms: float = 60_000
    idle_between_reads_ms: float = 1_000
    max_records: int = 10_000

    @property
    def renew_ms(self) -> float:
        """DynamoDBLeaseCoordinator: renewerIntervalMillis = failover / 3 - epsilon."""
        return self.failover_ms / 3 - self.epsilon_ms

    @property
    def taker_ms(self) -> float:
        """DynamoDBLeaseCoordinator: takerIntervalMillis = (failover + epsilon) * 2."""
        return (self.failover_ms + self.epsilon_ms) * 2


KCL_ITEM_BYTES = 300
"""The issue's assumption for a KCL lease item."""
KCL_KEY_BYTES = 40
"""What a KEYS_ONLY GSI entry holds: the lease key (and the owner it is keyed on)."""


def kcl_costs(
    shards: int, workers: int, kcl: KclDefaults | None = None
) -> dict[str, dict[str, float]]:
    """Read and write units per shard-minute of KCL 2.x and 3.x under their defaults.

    Both renew every held lease every ``failover / 3 - epsilon`` (one write each).
    KCL 2.x: every worker's lease taker Scans the whole table, eventually consistent,
    every ``2 x (failover + epsilon)``. KCL 3.x: a leader Scans every 20 s (eventually
    consistent); every worker Queries the KEYS_ONLY GSI on ``leaseOwner`` every 10 s for
    its own leases; the GSI is written only when an owner changes (none in a steady
    state).
    """
    kcl = kcl or KclDefaults()
    scan = math.ceil(shards * KCL_ITEM_BYTES / READ_UNIT) * 0.5
    renewals = shards / (kcl.renew_ms / 1000) * math.ceil(KCL_ITEM_BYTES / WRITE_UNIT)
    kcl2_reads = workers * scan / (kcl.taker_ms / 1000)
    own = math.ceil(shards / workers * KCL_KEY_BYTES / READ_UNIT) * 0.5
    kcl3_reads = scan / 20.0 + workers * own / 10.0
    per_shard_minute = 60.0 / shards
    return {
        "kcl2": {
            "read_units": round(kcl2_reads * per_shard_minute, 3),
            "write_units": round(renewals * per_shard_minute, 3),
        },
        "kcl3": {
            "read_units": round(kcl3_reads * per_shard_minute, 3),
            "write_units": round(renewals * per_shard_minute, 3),
        },
    }
