"""The lease table as a narrow interface: every write is conditional.

Every write that acts on behalf of an owner (renew, checkpoint, hand-off, release)
requires the ``leaseCounter`` and ``leaseOwner`` the worker last saw; a take requires
the counter and owner the taker observed. Whoever loses the race gets
:class:`~consumer.leases.model.LeaseLostError` and must stop acting on the lease.

Two implementations keep this contract, tested by one suite: :mod:`.memory` (fast
logic tests) and :mod:`.dynamo` (DynamoDB, or an emulator of it).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Literal, Protocol

from consumer.leases.board import Board, Leadership, Slot
from consumer.leases.model import (
    LandingRecord,
    Lease,
    LeaseError,
    ShardLoad,
    ShardReport,
)
from consumer.sequence import Checkpoint

Expect = int | None | Literal["any"]
"""What a join may replace: a slot with this counter, no slot (None), or any."""


class LeaseStore(Protocol):
    """A table of leases, one per shard, keyed by shard id."""

    async def ensure_table(self) -> None:
        """Create the table (and its workers table, where the store has one) if missing
        (idempotent, safe to race)."""

    async def table_exists(self) -> bool:
        """Whether the table (and its workers table) exists, in any status."""

    async def table_changes(self) -> list[str]:
        """What :meth:`ensure_table` and :meth:`ensure_owner_index` would change, one
        phrase each (``lander run --check``); nothing is changed."""

    async def ensure_owner_index(self) -> bool:
        """Add the owner index :meth:`owned_by` queries to a table without it (KCL 2.x's,
        say); True once it is usable. A refusal is logged in one line and costs only
        the index: :meth:`owned_by` scans meanwhile."""

    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        """Every shard lease, strongly consistent unless asked otherwise (the lander's
        own items, whose keys start with ``RESERVED_PREFIX``, are left out). Raises
        :class:`TableMissingError`."""

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

    async def checkpoint(
        self,
        lease: Lease,
        checkpoint: Checkpoint,
        load: ShardLoad | None = None,
        lag_ms: int | None = None,
    ) -> Lease:
        """Record progress (and the shard's measured load and lag), fenced by counter
        and owner; counter + 1."""

    async def request_handoff(self, lease: Lease, to: str, *, replacing: str | None = None) -> bool:
        """Ask the owner to hand the lease to ``to``; False if the lease has another owner
        by now or a request is pending (one naming ``replacing``, a receiver that died,
        is replaced). The owner's checkpoints meanwhile do not refuse it."""

    async def acknowledge(self, key: str, to: str) -> bool:
        """The receiver named in ``handoffTo`` says it is ready; False if not named."""

    async def owned_by(self, owner: str) -> list[str]:
        """Keys of the leases naming ``owner`` (KCL 3.x's ``LeaseOwnerToLeaseKeyIndex``:
        eventually consistent)."""

    async def withdraw(self, key: str, to: str) -> bool:
        """The worker named in ``handoffTo`` backs out (it is stopping): the request and
        its acknowledgement go; False if it is not named (any more)."""

    async def transfer(self, lease: Lease, to: str) -> bool:
        """The owner gives the lease to ``to`` (graceful hand-off) while ``to`` is still
        the one asking; counter + 1. False when ``to`` withdrew: the lease is unchanged
        and still the caller's (who releases it instead)."""

    async def release(self, lease: Lease) -> None:
        """The owner gives the lease up: no owner, counter + 1."""

    async def delete_lease(self, key: str) -> None:
        """Remove a lease item (no condition)."""

    async def read_landing(self, stream: str, *, consistent: bool = True) -> LandingRecord | None:
        """``stream``'s landing record (:mod:`consumer.landing.fingerprint`), or None.
        Raises :class:`TableMissingError`."""

    async def record_landing(
        self, stream: str, record: LandingRecord, *, replacing: str | None
    ) -> bool:
        """Write ``stream``'s landing record where it has none (``replacing`` None) or
        over the record whose digest is ``replacing``; False if the record is otherwise
        by now. Raises :class:`TableMissingError`."""


class BoardStore(Protocol):
    """The workers table (:mod:`consumer.leases.board`): one slot per worker and the
    leader item, every write conditional."""

    async def read_board(self) -> Board:
        """Every slot and the leader item: an eventually consistent Scan of the workers
        table. Raises :class:`TableMissingError`."""

    async def read_slot(self, worker: str) -> Slot | None:
        """One worker's slot, strongly consistent; None if it has none."""

    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Slot:
        """Put a fresh slot for ``worker``, owned by the process ``instance``, with the
        ``address`` others wake it at (:mod:`.wake`). With ``expect`` a counter, only
        over a slot that still has it (one a previous process of the same worker id
        left, proved dead or gone by :func:`~consumer.leases.board.claim_slot`); with
        None, only where there is no slot; else over whatever is there. Raises
        :class:`SlotLostError` when the slot is not as expected."""

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
        """Counter + 1 if the slot still has ``counter`` and is not fenced, recording the
        leases held and whether the worker leaves (``unfit``: because it cannot land),
        and dropping the first ``read``
        incoming keys (read from the previous beat); the slot as written. Raises
        :class:`SlotLostError`."""

    async def fence(self, worker: str, counter: int) -> bool:
        """Fence the slot if its counter is still ``counter``; False otherwise."""

    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        """Append lease keys to the slot's incoming list; False if it is gone or fenced."""

    async def notify(self, worker: str) -> Slot | None:
        """Bump the slot's notice counter; the slot as written (its address), or None if
        it is gone or fenced."""

    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        """Remove a slot: its own worker's (``counter`` as last written, a graceful
        stop), or a fenced one (``counter`` None); False if the condition fails."""

    async def read_leadership(self) -> Leadership | None:
        """The leader item, eventually consistent; None if there is none."""

    async def claim_leadership(
        self, worker: str, counter: int | None, address: str | None = None
    ) -> Leadership | None:
        """Become the leader: where there is no leader item (``counter`` None), or over
        one whose counter is still ``counter``. The item as written, or None if
        refused (someone else won, or the leader renewed)."""

    async def renew_leadership(
        self, worker: str, counter: int, *, deputy: str | None, address: str | None = None
    ) -> Leadership | None:
        """Counter + 1 and the deputy named, if ``worker`` still leads at ``counter``;
        the item as written, or None if the lead was taken."""

    async def resign_leadership(self, worker: str, counter: int) -> bool:
        """Delete the leader item if ``worker`` still leads at ``counter`` (a graceful
        stop: the next worker to read it claims it at once)."""


class CoordinatedStore(LeaseStore, BoardStore, Protocol):
    """A lease table with its workers table: what board coordination needs."""


class SlotLostError(LeaseError):
    """A beat was refused: the slot was fenced, removed, or replaced by a newer process
    under the same worker id. Every lease the worker holds is lost. Not retriable."""

    retriable = False


class TableMissingError(LeaseError):
    """The lease table does not exist (never created, or deleted under us)."""

    retriable = True


class LeaseStoreError(LeaseError):
    """A lease-table call failed otherwise; ``retriable`` for server errors,
    throttling and connection failures, not for access denied or a bad request."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable
