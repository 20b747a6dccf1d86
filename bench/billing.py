"""What the lease table would cost on DynamoDB: item sizes, units, and KCL's defaults.

:class:`BilledLeaseStore` is the in-memory lease table billing each call as DynamoDB
bills it: item sizes from the attributes :class:`consumer.leases.dynamo.DynamoLeaseStore`
writes, 4 KB read units (a strongly consistent read 1 unit, an eventually consistent
one half), 1 KB write units, conditional writes billed whether they succeed or not
(:mod:`bench.units`).
Every call also takes :data:`LATENCY` of (simulated) time, so that workers calling it
interleave as they do over a network. :mod:`bench.kcl` computes what KCL 2.x and 3.x cost
under their defaults with the same units. Used by :mod:`bench.scale`.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Coroutine, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, cast

from bench.units import READ_UNIT, WRITE_UNIT
from consumer.leases.board import Board, Leadership, Slot
from consumer.leases.board_item import KEY, LEADER_KEY, SLOT_PREFIX
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import WORKER_KEY_PREFIX, Lease, ShardLoad, ShardReport
from consumer.leases.store import Expect
from consumer.sequence import Checkpoint, checkpoint_to_item

SCAN_PAGE = 1 << 20
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


def slot_bytes(worker: str, slot: Slot | None) -> int:
    """The size DynamoDB bills for a worker's slot item, as
    :class:`consumer.leases.dynamo_board.DynamoBoard` writes it (one-letter attribute
    names; 3 bytes per list entry, one per boolean)."""
    if slot is None:
        return 0
    size = len(KEY) + len(SLOT_PREFIX) + len(worker.encode())
    size += 5 + _number(slot.counter) + _number(slot.joined) + _number(slot.notices)
    size += _number(slot.held) + 2 + 3 + sum(len(k) + 3 for k in slot.incoming)
    size += 2 if slot.fenced else 0
    size += 1 + _number(round(slot.cpu * 10))
    size += 1 + _number(slot.beat_ms) if slot.beat_ms is not None else 0
    size += 1 + len(slot.instance) if slot.instance is not None else 0
    size += 1 + len(slot.address) if slot.address is not None else 0
    return size


def leadership_bytes(leadership: Leadership | None) -> int:
    """The size of the leader item."""
    if leadership is None:
        return 0
    size = len(KEY) + len(LEADER_KEY) + 1 + len(leadership.leader) + 1 + _number(leadership.counter)
    size += 1 + len(leadership.deputy) if leadership.deputy is not None else 0
    size += 1 + len(leadership.address) if leadership.address is not None else 0
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
    item_writes: Counter[str] = field(default_factory=Counter)
    """Write units by item (lease key, ``worker/<id>``, ``leader``): the hottest one
    is what one partition must serve."""

    def minus(self, before: Bill) -> Bill:
        """What was billed since ``before`` (a copy taken earlier)."""
        return Bill(
            self.calls - before.calls,
            self.read_units - before.read_units,
            self.write_units - before.write_units,
            self.item_writes - before.item_writes,
        )

    def copy(self) -> Bill:
        """A snapshot."""
        return Bill(
            Counter(self.calls), self.read_units, self.write_units, Counter(self.item_writes)
        )

    def hottest(self) -> tuple[str, float]:
        """The item written most (by write units), and its write units."""
        if not self.item_writes:
            return "-", 0.0
        key, units = self.item_writes.most_common(1)[0]
        return key, float(units)


class BilledLeaseStore(MemoryLeaseStore):
    """The in-memory lease table, billing each call as DynamoDB would."""

    def __init__(self) -> None:
        super().__init__()
        self.bill = Bill()
        self._sizes: dict[str, int] = {}
        self._owners: dict[str, str] = {}
        self._slot_sizes: dict[str, int] = {}
        self._workers_total = 0
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
        workers = key == LEADER_KEY or key.startswith(SLOT_PREFIX)
        size = self._workers_resize(key) if workers else self._resize(key)
        self.bill.calls[name if ok else f"{name} (condition failed)"] += 1
        units = max(1, math.ceil(size / WRITE_UNIT))
        self.bill.write_units += units
        self.bill.item_writes[key] += units
        if not workers:
            self._index_write(key)

    def _workers_resize(self, key: str) -> int:
        """Record a workers-table item's size after a write; the larger of before and
        after."""
        if key == LEADER_KEY:
            after = leadership_bytes(self.leadership)
        else:
            worker = key[len(SLOT_PREFIX) :]
            after = slot_bytes(worker, (self.slots or {}).get(worker))
        before = self._slot_sizes.get(key, 0)
        self._slot_sizes[key] = after
        self._workers_total += after - before
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
        """An eventually consistent Scan of the workers table."""
        await asyncio.sleep(LATENCY * (1 + self._workers_total / 100_000))
        found = await super().read_board()
        self.bill.calls["Scan workers (eventual)"] += max(
            1, math.ceil(self._workers_total / SCAN_PAGE)
        )
        self.bill.read_units += max(1, math.ceil(self._workers_total / READ_UNIT)) / 2
        return found

    async def read_slot(self, worker: str) -> Slot | None:
        """A strongly consistent GetItem of a slot."""
        await asyncio.sleep(LATENCY)
        found = await super().read_slot(worker)
        self.bill.calls["GetItem slot (strong)"] += 1
        size = self._slot_sizes.get(SLOT_PREFIX + worker, 0)
        self.bill.read_units += max(1, math.ceil(size / READ_UNIT))
        return found

    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Slot:
        """GetItem of the slot, then the conditional PutItem of a fresh one."""
        await self.read_slot(worker)
        call = super().join(worker, instance, expect=expect, address=address)
        return cast("Slot", await self._billed("PutItem slot join", SLOT_PREFIX + worker, call))

    async def beat(
        self,
        worker: str,
        counter: int,
        *,
        held: int,
        leaving: bool,
        read: int,
        cpu: float = 0.0,
        unfit: bool = False,
    ) -> Slot:
        """UpdateItem on the worker's slot, returning it (no read units: ALL_NEW is free)."""
        call = super().beat(
            worker, counter, held=held, leaving=leaving, read=read, cpu=cpu, unfit=unfit
        )
        return cast("Slot", await self._billed("UpdateItem slot beat", SLOT_PREFIX + worker, call))

    async def fence(self, worker: str, counter: int) -> bool:
        call = super().fence(worker, counter)
        return cast("bool", await self._billed("UpdateItem slot fence", SLOT_PREFIX + worker, call))

    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        call = super().deliver(worker, keys)
        key = SLOT_PREFIX + worker
        return cast("bool", await self._billed("UpdateItem slot deliver", key, call))

    async def notify(self, worker: str) -> Slot | None:
        call = super().notify(worker)
        key = SLOT_PREFIX + worker
        return cast("Slot | None", await self._billed("UpdateItem slot notice", key, call))

    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        call = super().remove_slot(worker, counter=counter)
        return cast("bool", await self._billed("DeleteItem slot", SLOT_PREFIX + worker, call))

    async def read_leadership(self) -> Leadership | None:
        """An eventually consistent GetItem of the leader item."""
        await asyncio.sleep(LATENCY)
        found = await super().read_leadership()
        self.bill.calls["GetItem leader (eventual)"] += 1
        self.bill.read_units += 0.5
        return found

    async def claim_leadership(
        self, worker: str, counter: int | None, address: str | None = None
    ) -> Leadership | None:
        call = super().claim_leadership(worker, counter, address)
        return cast(
            "Leadership | None", await self._billed("PutItem leader claim", LEADER_KEY, call)
        )

    async def renew_leadership(
        self, worker: str, counter: int, *, deputy: str | None, address: str | None = None
    ) -> Leadership | None:
        call = super().renew_leadership(worker, counter, deputy=deputy, address=address)
        return cast(
            "Leadership | None", await self._billed("PutItem leader renew", LEADER_KEY, call)
        )

    async def resign_leadership(self, worker: str, counter: int) -> bool:
        call = super().resign_leadership(worker, counter)
        return cast("bool", await self._billed("DeleteItem leader", LEADER_KEY, call))

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
