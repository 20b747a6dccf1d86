"""An in-memory lease table for fast tests of the logic that uses one.

It keeps the same contract as the DynamoDB store (the contract tests run against
both); it is not a production backend. Each method is atomic because it never awaits
between reading and writing.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace

from consumer.leases.board import Board, Leadership, Slot
from consumer.leases.model import (
    RESERVED_PREFIX,
    TABLE_GONE,
    LandingRecord,
    Lease,
    LeaseLostError,
    ShardLoad,
    ShardReport,
    new_incarnation,
    wall_ms,
)
from consumer.leases.store import Expect, SlotLostError, TableMissingError
from consumer.sequence import Checkpoint


class MemoryLeaseStore:
    """A dict of leases with conditional writes."""

    def __init__(self) -> None:
        self.leases: dict[str, Lease] | None = None
        """The table; None while it does not exist."""
        self.slots: dict[str, Slot] | None = None
        """The workers table's slots; None while it does not exist."""
        self.leadership: Leadership | None = None
        """The leader item."""
        self.landings: dict[str, LandingRecord] = {}
        """Each stream's landing record (items of the lease table)."""

    def drop_table(self) -> None:
        """Delete both tables, as an operator might."""
        self.leases = None
        self.slots = None
        self.leadership = None
        self.landings = {}

    def _table(self) -> dict[str, Lease]:
        if self.leases is None:
            raise TableMissingError("lease table does not exist")
        return self.leases

    def _fenced(self, lease: Lease) -> dict[str, Lease]:
        """The table, if the stored lease still has the counter, owner and incarnation
        we saw."""
        if self.leases is None:
            raise LeaseLostError(lease.key, TABLE_GONE)
        current = self.leases.get(lease.key)
        if current is None:
            raise LeaseLostError(lease.key, "lease item does not exist")
        if (current.counter, current.owner, current.incarnation) != (
            lease.counter,
            lease.owner,
            lease.incarnation,
        ):
            raise LeaseLostError(lease.key)
        return self.leases

    async def ensure_table(self) -> None:
        """Create the tables if missing."""
        if self.leases is None:
            self.leases = {}
        if self.slots is None:
            self.slots = {}

    async def table_exists(self) -> bool:
        """Whether the tables exist."""
        return self.leases is not None and self.slots is not None

    async def table_changes(self) -> list[str]:
        """The tables' creation while they do not exist."""
        changes = ["create the lease table"] if self.leases is None else []
        return changes + (["create the workers table"] if self.slots is None else [])

    async def ensure_owner_index(self) -> bool:
        """Nothing to add: :meth:`owned_by` reads the dict."""
        return self.leases is not None

    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        """All shard leases (always current: the fake has no replicas)."""
        return [
            lease for key, lease in self._table().items() if not key.startswith(RESERVED_PREFIX)
        ]

    async def owned_by(self, owner: str) -> list[str]:
        """Keys of the leases naming ``owner``."""
        return sorted(
            key
            for key, lease in self._table().items()
            if lease.owner == owner and not key.startswith(RESERVED_PREFIX)
        )

    async def get_lease(self, key: str) -> Lease | None:
        """One item, or None."""
        return self._table().get(key)

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        """Create an unowned lease unless one exists."""
        table = self._table()
        if key in table:
            return False
        table[key] = Lease(
            key=key,
            checkpoint=checkpoint,
            parents=frozenset(parents),
            incarnation=new_incarnation(),
        )
        return True

    async def take(self, lease: Lease, owner: str) -> Lease:
        """Become the owner if the lease is as observed. A hand-off request stands
        when the taker is the owner the lease already names (see the DynamoDB store)."""
        table = self._fenced(lease)
        current = table[lease.key]
        switched = 1 if lease.owner != owner else 0
        taken = current.evolve(
            owner=owner,
            counter=lease.counter + 1,
            owner_switches=current.owner_switches + switched,
            handoff_to=None if switched else current.handoff_to,
            handoff_ack=None if switched else current.handoff_ack,
            updated_ms=wall_ms(),
        )
        table[lease.key] = taken
        return taken

    async def renew(
        self, lease: Lease, lag_ms: int | None = None, report: ShardReport | None = None
    ) -> Lease:
        """Counter + 1 if still ours, with the owner's lag and report."""
        table = self._fenced(lease)
        current = table[lease.key]
        renewed = current.evolve(
            counter=lease.counter + 1,
            lag_ms=current.lag_ms if lag_ms is None else lag_ms,
            report=current.report if report is None else report,
            updated_ms=wall_ms(),
        )
        table[lease.key] = renewed
        return renewed

    async def checkpoint(
        self,
        lease: Lease,
        checkpoint: Checkpoint,
        load: ShardLoad | None = None,
        lag_ms: int | None = None,
    ) -> Lease:
        """Record progress if still ours."""
        table = self._fenced(lease)
        current = table[lease.key]
        done = current.evolve(
            checkpoint=checkpoint,
            owner_switches=0,
            counter=lease.counter + 1,
            updated_ms=wall_ms(),
            load=current.load if load is None else load,
            lag_ms=current.lag_ms if lag_ms is None else lag_ms,
        )
        table[lease.key] = done
        return done

    async def request_handoff(self, lease: Lease, to: str, *, replacing: str | None = None) -> bool:
        """Mark a hand-off request if the owner is the one seen and none is pending."""
        table = self._table()
        current = table.get(lease.key)
        if current is None or lease.owner is None or current.owner != lease.owner:
            return False
        pending = current.handoff_to
        if pending is not None and (replacing is None or pending != replacing):
            return False
        table[lease.key] = table[lease.key].evolve(handoff_to=to, handoff_ack=None)
        return True

    async def acknowledge(self, key: str, to: str) -> bool:
        """Record the receiver's readiness if it is the one named."""
        current = self._table().get(key)
        if current is None or current.handoff_to != to:
            return False
        self._table()[key] = current.evolve(handoff_ack=to)
        return True

    async def withdraw(self, key: str, to: str) -> bool:
        """Drop the request naming ``to`` and its acknowledgement."""
        current = self._table().get(key)
        if current is None or current.handoff_to != to:
            return False
        self._table()[key] = current.evolve(handoff_to=None, handoff_ack=None)
        return True

    async def transfer(self, lease: Lease, to: str) -> bool:
        """Give the lease to ``to`` if it still asks for it."""
        table = self._fenced(lease)
        current = table[lease.key]
        if current.handoff_to != to:
            return False
        table[lease.key] = current.evolve(
            owner=to,
            counter=lease.counter + 1,
            owner_switches=current.owner_switches + 1,
            handoff_to=None,
            handoff_ack=None,
            updated_ms=wall_ms(),
        )
        return True

    async def release(self, lease: Lease) -> None:
        """Give the lease up."""
        table = self._fenced(lease)
        table[lease.key] = table[lease.key].evolve(
            owner=None,
            counter=lease.counter + 1,
            handoff_to=None,
            handoff_ack=None,
            updated_ms=wall_ms(),
        )

    async def delete_lease(self, key: str) -> None:
        """Remove a lease."""
        self._table().pop(key, None)

    async def read_landing(self, stream: str, *, consistent: bool = True) -> LandingRecord | None:
        """The stream's landing record, or None."""
        self._table()
        return self.landings.get(stream)

    async def record_landing(
        self, stream: str, record: LandingRecord, *, replacing: str | None
    ) -> bool:
        """Write the record where it has none, or over the digest ``replacing``."""
        self._table()
        current = self.landings.get(stream)
        if (current.digest if current is not None else None) != replacing:
            return False
        self.landings[stream] = record
        return True

    # -- the workers table ----------------------------------------------------------

    def _workers(self) -> dict[str, Slot]:
        if self.leases is None or self.slots is None:
            raise TableMissingError("workers table does not exist")
        return self.slots

    def _slot(self, worker: str) -> Slot | None:
        slot = self._workers().get(worker)
        return None if slot is None or slot.fenced else slot

    async def read_board(self) -> Board:
        """Every slot and the leader item."""
        return Board(slots=dict(self._workers()), leadership=self.leadership)

    async def read_slot(self, worker: str) -> Slot | None:
        """One slot."""
        return self._workers().get(worker)

    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Slot:
        """A fresh slot for ``worker`` if the slot there is as expected."""
        slots = self._workers()
        previous = slots.get(worker)
        if expect not in ("any", None if previous is None else previous.counter):
            raise SlotLostError(f"slot of {worker} changed before the join")
        counter = 0 if previous is None else previous.counter + 1
        slot = Slot(counter=counter, joined=wall_ms(), instance=instance, address=address)
        slots[worker] = slot
        return slot

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
        """Counter + 1 if the slot is as last written and not fenced."""
        if self.leases is None or self.slots is None:
            raise SlotLostError("lease table does not exist")
        slot = self._slot(worker)
        if slot is None or slot.counter != counter:
            raise SlotLostError(f"slot of {worker} fenced, removed or replaced")
        slot = replace(
            slot,
            counter=counter + 1,
            held=held,
            leaving=leaving,
            unfit=unfit,
            incoming=slot.incoming[read:],
            cpu=cpu,
            beat_ms=wall_ms(),
        )
        self.slots[worker] = slot
        return slot

    async def fence(self, worker: str, counter: int) -> bool:
        """Fence the slot if its counter stood still."""
        slot = self._slot(worker)
        if slot is None or slot.counter != counter:
            return False
        self._workers()[worker] = replace(slot, fenced=True)
        return True

    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        """Append to the slot's incoming list."""
        slot = self._slot(worker)
        if slot is None:
            return False
        self._workers()[worker] = replace(slot, incoming=(*slot.incoming, *keys))
        return True

    async def notify(self, worker: str) -> Slot | None:
        """Bump the slot's notices."""
        slot = self._slot(worker)
        if slot is None:
            return None
        slot = self._workers()[worker] = replace(slot, notices=slot.notices + 1)
        return slot

    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        """Remove a slot: one's own (by counter) or a fenced one."""
        slot = self._workers().get(worker)
        if slot is None:
            return False
        if counter is None and not slot.fenced:
            return False
        if counter is not None and (slot.fenced or slot.counter != counter):
            return False
        del self._workers()[worker]
        return True

    async def read_leadership(self) -> Leadership | None:
        """The leader item."""
        self._workers()
        return self.leadership

    async def claim_leadership(
        self, worker: str, counter: int | None, address: str | None = None
    ) -> Leadership | None:
        """Lead where nobody does, or over the counter watched."""
        self._workers()
        current = self.leadership
        if (current is None) != (counter is None):
            return None
        if current is not None and current.counter != counter:
            return None
        taken = Leadership(worker, 0 if current is None else current.counter + 1, None, address)
        self.leadership = taken
        return taken

    async def renew_leadership(
        self, worker: str, counter: int, *, deputy: str | None, address: str | None = None
    ) -> Leadership | None:
        """Counter + 1 if still leading at ``counter``."""
        self._workers()
        current = self.leadership
        if current is None or current.leader != worker or current.counter != counter:
            return None
        self.leadership = Leadership(worker, counter + 1, deputy, address)
        return self.leadership

    async def resign_leadership(self, worker: str, counter: int) -> bool:
        """Delete the leader item if still leading at ``counter``."""
        current = self.leadership
        if current is None or current.leader != worker or current.counter != counter:
            return False
        self.leadership = None
        return True
