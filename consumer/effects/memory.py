"""The effects table in memory, fenced by the in-memory lease table: for fast tests of
the logic that uses it (the contract tests run it beside DynamoDB's)."""

from __future__ import annotations

from consumer.effects.model import Effect
from consumer.effects.store import EffectRaceError
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import TABLE_GONE, Lease, LeaseLostError


def _same(a: Effect | None, b: Effect | None) -> bool:
    """Whether a stored record is the one a writer read (by claim and state)."""
    if a is None or b is None:
        return a is b
    return (a.tenure.claim, a.state) == (b.tenure.claim, b.state)


class MemoryEffectStore:
    """A dict of effect records; each method is atomic (it never awaits inside)."""

    def __init__(self, leases: MemoryLeaseStore) -> None:
        self.leases = leases
        self.records: dict[str, Effect] = {}

    async def check(self) -> None:
        """Nothing to make: the dict is there."""

    async def read(self, key: str) -> Effect | None:
        """The key's record, or None."""
        return self.records.get(key)

    async def write(self, effect: Effect, fence: Lease, *, over: Effect | None) -> None:
        """Write if the lease is still ``fence`` and the record still ``over``."""
        table = self.leases.leases
        if table is None:
            raise LeaseLostError(fence.key, TABLE_GONE)
        current = table.get(fence.key)
        held = (fence.owner, fence.counter, fence.incarnation)
        if current is None or (current.owner, current.counter, current.incarnation) != held:
            raise LeaseLostError(fence.key, "the lease changed before the effect's write")
        if not _same(self.records.get(effect.key), over):
            raise EffectRaceError(f"effect {effect.key} changed under its writer")
        self.records[effect.key] = effect

    async def release(self, effect: Effect) -> bool:
        """Delete the claim if it is still there as written."""
        if not _same(self.records.get(effect.key), effect):
            return False
        del self.records[effect.key]
        return True
