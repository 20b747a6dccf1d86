"""Effects on groups of records, cut where a delivery after a crash cuts them again.

An effect per record costs a claim and a completion per record (docs/effects.md). A
processor whose effect takes many records at once (one bulk insert, one file, one API
call with a list) runs it per group: :class:`ShardGroups` buffers the records it is
given, cuts a group every ``size`` records, runs ``effect(key, records)`` once per
group under the record guarantee (:mod:`.once`, either mode) and checkpoints at the
group's last record.

Every group starts right after a checkpoint, so a delivery after a crash, a failover or
a restart starts at a group's first record again: the group's key is that record's
position in the shard's lease. A group's extent is written with its claim
(:attr:`~.model.Effect.covers`), so a group cut short (:meth:`ShardGroups.flush`: at
shutdown, at the shard's end, or on a quiet shard) is cut the same way again: a later
delivery waits for the same records before it decides. The processor leaves the
checkpoints to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from consumer.archive.layout import bound, parse_bound
from consumer.effects.model import Mode
from consumer.effects.once import Outcome, ShardEffects
from consumer.lifecycle.processor import Checkpointer
from consumer.stream.records import Record

GroupEffect = Callable[[str, list[Record]], Awaitable[Any]]
"""``effect(key, records)``: one group's effect, its result small JSON."""


class ShardGroups:
    """One processor instance's records, cut into groups of ``size``."""

    def __init__(self, once: ShardEffects, size: int = 100) -> None:
        if size < 1:
            raise ValueError(f"a group holds at least one record, not {size}")
        self.once = once
        self.size = size
        self._buffer: list[Record] = []

    async def add(
        self,
        checkpointer: Checkpointer,
        records: Sequence[Record],
        effect: GroupEffect,
        *,
        mode: Mode = Mode.KEYED,
    ) -> list[Outcome]:
        """Buffer ``records`` (a batch, in order); run and checkpoint every group that
        is whole. The outcomes of the groups run now."""
        self._buffer.extend(records)
        return await self._cut(checkpointer, effect, mode, final=False)

    async def flush(
        self, checkpointer: Checkpointer, effect: GroupEffect, *, mode: Mode = Mode.KEYED
    ) -> list[Outcome]:
        """Cut what is buffered into a last, shorter group and run it (from
        ``shutdown_requested`` and ``shard_ended``, or on a quiet shard). A group cut
        longer before, whose records have not all arrived, waits: it is not run."""
        return await self._cut(checkpointer, effect, mode, final=True)

    def drop(self) -> None:
        """Forget what is buffered (``lease_lost``: another worker delivers it again)."""
        self._buffer.clear()

    async def _cut(
        self, checkpointer: Checkpointer, effect: GroupEffect, mode: Mode, *, final: bool
    ) -> list[Outcome]:
        outcomes = []
        while self._buffer:
            first = self._buffer[0]
            key = f"{getattr(checkpointer, 'key', first.shard_id)}@{bound(first.position)}"
            group = await self._group(key, final=final)
            if group is None:
                break
            positions = ",".join(bound(r.position) for r in group).encode()

            async def run(key: str, records: list[Record] = group) -> Any:
                return await effect(key, records)

            outcome = await self.once.run(
                checkpointer, key, positions, run, mode=mode, covers=bound(group[-1].position)
            )
            del self._buffer[: len(group)]
            await checkpointer.checkpoint(group[-1].position)
            outcomes.append(outcome)
        return outcomes

    async def _group(self, key: str, *, final: bool) -> list[Record] | None:
        """The group that starts the buffer: as cut before (its claim's extent), or the
        next ``size`` records (fewer when ``final``); None while it is not whole."""
        effects = self.once.effects
        existing = await effects.store.read(key)
        live = existing is not None and existing.expires > int(effects.clock())
        if live and existing is not None and existing.covers is not None:
            last = parse_bound(existing.covers)
            if self._buffer[-1].position < last:
                return None  # the rest of the group has not arrived yet
            return [r for r in self._buffer if r.position <= last]
        if len(self._buffer) < self.size and not final:
            return None
        return self._buffer[: self.size]
