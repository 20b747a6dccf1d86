"""A processor that processes nothing and notes where each shard started: for tests of
which leases a worker takes and at which checkpoints."""

from __future__ import annotations

from collections.abc import Callable

from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    ProcessRecordsInput,
)


class Idle:
    """Notes each shard's starting checkpoint in ``starts``; ends ended shards."""

    def __init__(self, starts: dict[str, str]) -> None:
        self.starts = starts

    async def initialize(self, init: InitializationInput) -> None:
        self.starts[init.shard_id] = str(init.checkpoint)

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        pass

    async def lease_lost(self) -> None:
        pass

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        await checkpointer.checkpoint()

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        pass


def idle(starts: dict[str, str]) -> Callable[[], Idle]:
    """A processor factory whose processors note their starts in ``starts``."""
    return lambda: Idle(starts)
