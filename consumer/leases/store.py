"""The lease table as a narrow interface: every write is conditional.

Every write that acts on behalf of an owner (renew, checkpoint, hand-off, release)
requires the ``leaseCounter`` and ``leaseOwner`` the worker last saw; a take requires
the counter and owner the taker observed. Whoever loses the race gets
:class:`~consumer.leases.model.LeaseLostError` and must stop acting on the lease.

Two implementations keep this contract, tested by one suite: :mod:`.memory` (fast
logic tests) and :mod:`.dynamo` (DynamoDB, or an emulator of it).
"""

from __future__ import annotations

from collections.abc import Set
from typing import Protocol

from consumer.leases.model import Lease, LeaseError, ShardReport
from consumer.sequence import Checkpoint


class LeaseStore(Protocol):
    """A table of leases, one per shard, keyed by shard id."""

    async def ensure_table(self) -> None:
        """Create the table if it is missing (idempotent, safe to race)."""

    async def list_leases(self) -> list[Lease]:
        """Every shard lease, strongly consistent (worker-id claims, whose keys start
        with ``WORKER_KEY_PREFIX``, are left out). Raises :class:`TableMissingError`."""

    async def get_lease(self, key: str) -> Lease | None:
        """One item by key, strongly consistent; None if it does not exist. Raises
        :class:`TableMissingError`."""

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        """Create an unowned lease unless one exists; True if this call created it."""

    async def take(self, lease: Lease, owner: str) -> Lease:
        """Become the owner, if the lease is still as observed (counter and owner)."""

    async def renew(
        self, lease: Lease, lag_ms: int | None = None, report: ShardReport | None = None
    ) -> Lease:
        """Heartbeat: counter + 1, recording the owner's lag and report where given.
        The returned lease shows any hand-off request."""

    async def checkpoint(self, lease: Lease, checkpoint: Checkpoint) -> Lease:
        """Record progress, fenced by counter and owner; counter + 1."""

    async def request_handoff(self, lease: Lease, to: str) -> bool:
        """Ask the owner to hand the lease to ``to``; False if it changed meanwhile."""

    async def transfer(self, lease: Lease, to: str) -> None:
        """The owner gives the lease to ``to`` (graceful hand-off); counter + 1."""

    async def release(self, lease: Lease) -> None:
        """The owner gives the lease up: no owner, counter + 1."""

    async def delete_lease(self, key: str) -> None:
        """Remove a lease item (no condition)."""


class TableMissingError(LeaseError):
    """The lease table does not exist (never created, or deleted under us)."""

    retriable = True


class LeaseStoreError(LeaseError):
    """A lease-table call failed otherwise; ``retriable`` for server errors,
    throttling and connection failures, not for access denied or a bad request."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable
