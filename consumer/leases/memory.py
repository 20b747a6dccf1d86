"""An in-memory lease table for fast tests of the logic that uses one.

It keeps the same contract as the DynamoDB store (the contract tests run against
both); it is not a production backend. Each method is atomic because it never awaits
between reading and writing.
"""

from __future__ import annotations

from collections.abc import Set

from consumer.leases.model import WORKER_KEY_PREFIX, Lease, LeaseLostError, ShardReport, wall_ms
from consumer.leases.store import TableMissingError
from consumer.sequence import Checkpoint


class MemoryLeaseStore:
    """A dict of leases with conditional writes."""

    def __init__(self) -> None:
        self.leases: dict[str, Lease] | None = None
        """The table; None while it does not exist."""

    def drop_table(self) -> None:
        """Delete the whole table, as an operator might."""
        self.leases = None

    def _table(self) -> dict[str, Lease]:
        if self.leases is None:
            raise TableMissingError("lease table does not exist")
        return self.leases

    def _fenced(self, lease: Lease) -> dict[str, Lease]:
        """The table, if the stored lease still has the counter and owner we saw."""
        if self.leases is None:
            raise LeaseLostError(lease.key, "lease table does not exist")
        current = self.leases.get(lease.key)
        if current is None:
            raise LeaseLostError(lease.key, "lease item does not exist")
        if current.counter != lease.counter or current.owner != lease.owner:
            raise LeaseLostError(lease.key)
        return self.leases

    async def ensure_table(self) -> None:
        """Create the table if missing."""
        if self.leases is None:
            self.leases = {}

    async def list_leases(self) -> list[Lease]:
        """All shard leases."""
        return [
            lease for key, lease in self._table().items() if not key.startswith(WORKER_KEY_PREFIX)
        ]

    async def get_lease(self, key: str) -> Lease | None:
        """One item, or None."""
        return self._table().get(key)

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        """Create an unowned lease unless one exists."""
        table = self._table()
        if key in table:
            return False
        table[key] = Lease(key=key, checkpoint=checkpoint, parents=frozenset(parents))
        return True

    async def take(self, lease: Lease, owner: str) -> Lease:
        """Become the owner if the lease is as observed."""
        table = self._fenced(lease)
        switched = 1 if lease.owner != owner else 0
        taken = table[lease.key].evolve(
            owner=owner,
            counter=lease.counter + 1,
            owner_switches=table[lease.key].owner_switches + switched,
            handoff_to=None,
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

    async def checkpoint(self, lease: Lease, checkpoint: Checkpoint) -> Lease:
        """Record progress if still ours."""
        table = self._fenced(lease)
        done = table[lease.key].evolve(
            checkpoint=checkpoint, owner_switches=0, counter=lease.counter + 1, updated_ms=wall_ms()
        )
        table[lease.key] = done
        return done

    async def request_handoff(self, lease: Lease, to: str) -> bool:
        """Mark a hand-off request if the lease is unchanged and none is pending."""
        try:
            table = self._fenced(lease)
        except LeaseLostError:
            return False
        if table[lease.key].handoff_to is not None:
            return False
        table[lease.key] = table[lease.key].evolve(handoff_to=to)
        return True

    async def transfer(self, lease: Lease, to: str) -> None:
        """Give the lease to ``to``."""
        table = self._fenced(lease)
        current = table[lease.key]
        table[lease.key] = current.evolve(
            owner=to,
            counter=lease.counter + 1,
            owner_switches=current.owner_switches + 1,
            handoff_to=None,
            updated_ms=wall_ms(),
        )

    async def release(self, lease: Lease) -> None:
        """Give the lease up."""
        table = self._fenced(lease)
        table[lease.key] = table[lease.key].evolve(
            owner=None, counter=lease.counter + 1, handoff_to=None, updated_ms=wall_ms()
        )

    async def delete_lease(self, key: str) -> None:
        """Remove a lease."""
        self._table().pop(key, None)
