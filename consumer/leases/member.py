"""What the parts of a worker's coordination ask of the worker they run in.

:class:`.leader.Leader` and :class:`.handoff.Handoffs` each own their state; what they
need of the worker's (the leases it holds, its acting window, its slot) they ask
through these interfaces, which :class:`.board_coordinator.BoardCoordinator` keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from consumer.leases.model import Lease


class Member(Protocol):
    """What the leader asks of the worker it runs in."""

    def is_leader(self) -> bool:
        """Whether the worker holds the leader item, inside both acting windows."""

    def is_deputy(self) -> bool:
        """Whether the leader item names the worker its deputy, inside its window."""

    def notices(self) -> int | None:
        """The notices counter of the worker's slot, as its last beat wrote it."""

    def ready(self, leases: Iterable[Lease]) -> set[str]:
        """Leases that may be processed now (parents done), of the streams read here."""

    async def read_table(self, *, consistent: bool = True) -> list[Lease]:
        """Every lease (a missing table is created again, empty)."""

    async def take_given(self, lease: Lease) -> Lease | None:
        """Take a lease given to the worker; the lease taken, if it was."""

    async def read_own_leases(self) -> None:
        """Read the leases naming the worker, and act on them."""

    async def table_gone(self) -> None:
        """The lease table was deleted under the fleet."""


class Holder(Protocol):
    """What the hand-offs ask of the worker whose leases they move."""

    def holds(self, key: str) -> bool:
        """Whether the worker holds the lease (lost or not)."""

    async def take_given(self, lease: Lease) -> Lease | None:
        """Take a lease that names the worker; the lease taken, if it was."""

    def notice_handoff(self, lease: Lease) -> None:
        """A held lease read with its receiver's acknowledgement: stop the shard."""

    async def notify_leader(self) -> None:
        """Tell the leader a lease needs a home."""
