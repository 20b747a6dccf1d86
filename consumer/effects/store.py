"""The effects table as a narrow interface: every write conditional on the record as
the writer read it and fenced by the shard's lease.

Two implementations keep this contract, tested by one suite: :mod:`.memory` (fast
logic tests, over the in-memory lease table) and :mod:`.dynamo` (DynamoDB: a
transaction of a condition check on the lease item and the write).
"""

from __future__ import annotations

from typing import Protocol

from consumer.effects.model import Effect
from consumer.errors import LanderError
from consumer.leases.model import Lease


class EffectRaceError(LanderError):
    """The record was not as the writer read it any more: read it again and decide."""

    retriable = True


class EffectStoreError(LanderError):
    """The effects table refused or failed a call; ``retriable`` for server errors,
    throttling and connection failures."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


class EffectStore(Protocol):
    """One record per effect key."""

    async def check(self) -> None:
        """Make the table where it is missing and read it once: the start-up check
        (:class:`EffectStoreError` when it cannot be used)."""

    async def read(self, key: str) -> Effect | None:
        """The key's record, strongly consistent; None if there is none."""

    async def write(self, effect: Effect, fence: Lease, *, over: Effect | None) -> None:
        """Write ``effect`` where the key's record is still ``over`` (None: there is
        none; else the one with that claim and state), while the shard's lease is still
        ``fence`` (owner, counter, incarnation). Raises
        :class:`~consumer.leases.model.LeaseLostError` when the lease is not,
        :class:`EffectRaceError` when the record is not."""

    async def release(self, effect: Effect) -> bool:
        """Delete ``effect``, a claim in progress, if it is still there as written (its
        effect certainly did not happen: it may be run again); False if it is not."""
