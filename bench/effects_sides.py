"""The processors of the effects benchmark (:mod:`bench.effects`): one trivial async side
effect per record, called directly (the baseline) or through ``consumer.effects``.

Each processor handles its batch one record at a time, as the processor in
docs/effects.md does, then checkpoints it, and notes in a :class:`Tally` when the
first record came and when the last was checkpointed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from bench.effects_bill import DynamoBill
from consumer.effects import Effects, Mode, ShardEffects
from consumer.landing.envelope import EventIdPointer
from consumer.lifecycle.processor import Checkpointer, InitializationInput, ProcessRecordsInput
from consumer.stream.records import Record

POINTER = "/id"
"""The event id in the drain's payloads (``{"id": "<shard>-<n>", ...}``)."""


@dataclass
class Tally:
    """What one worker run's processors have done."""

    expected: int
    bill: DynamoBill
    began: float = 0.0
    first_at: float | None = None
    last_at: float | None = None
    count: int = 0
    busy_seconds: float = 0.0
    """Time inside process_records, summed over shards (the checkpoint included)."""
    effect_calls: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def effect(self, key: str) -> dict[str, str]:
        """The side effect every side runs: trivial, in-process, async."""
        self.effect_calls += 1
        return {"receipt": key}


Handle = Callable[[Checkpointer, Record], Awaitable[None]]


class SideProcessor:
    """Runs ``handle`` on each record, then checkpoints the batch."""

    def __init__(self, tally: Tally, handle: Handle) -> None:
        self.tally = tally
        self.handle = handle

    async def initialize(self, init: InitializationInput) -> None:
        """Nothing to set up."""

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Each record's effect, one at a time; then the checkpoint."""
        if not batch.records:
            return
        tally = self.tally
        started = time.perf_counter()
        if tally.first_at is None:
            tally.first_at = started
            tally.bill.phase = "records"
        for record in batch.records:
            await self.handle(batch.checkpointer, record)
        await batch.checkpointer.checkpoint()
        ended = time.perf_counter()
        tally.busy_seconds += ended - started
        tally.count += len(batch.records)
        if tally.count >= tally.expected and not tally.done.is_set():
            tally.last_at = ended
            tally.bill.phase = "shutdown"
            tally.done.set()

    async def lease_lost(self) -> None:
        """Nothing buffered."""

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Nothing buffered."""

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Everything handled is checkpointed already."""
        await checkpointer.checkpoint()


def baseline(tally: Tally) -> Callable[[], SideProcessor]:
    """The processor without the store: the event id, then the effect."""
    pointer = EventIdPointer(POINTER)

    async def handle(_: Checkpointer, record: Record) -> None:
        key = pointer.resolve(orjson.loads(record.data))
        assert key is not None
        await tally.effect(key)

    return lambda: SideProcessor(tally, handle)


def through_effects(tally: Tally, effects: Effects) -> Callable[[], SideProcessor]:
    """The documented processor: one ShardEffects per shard, each record's effect once."""

    def make() -> SideProcessor:
        once: ShardEffects = effects.shard()

        async def handle(checkpointer: Checkpointer, record: Record) -> None:
            outcome = await once.record(checkpointer, record, tally.effect, mode=Mode.KEYED)
            tally.outcomes[outcome.status] += 1

        return SideProcessor(tally, handle)

    return make
