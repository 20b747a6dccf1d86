"""The record processor the failover benchmark's worker processes run.

It appends one JSON line per non-empty batch (and per lifecycle call) to
``$BENCH_RECORDING_DIR/<worker_id>.jsonl`` with the wall time, then checkpoints the
batch, as a real processor would after landing it. One line per batch rather than per
record keeps the file small; the benchmark only needs when each worker first delivered
records of each shard. A plain ``write`` is enough: what a killed process wrote is in
the kernel already.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from consumer.processor import Checkpointer, InitializationInput, ProcessRecordsInput

RECORDING_DIR = "BENCH_RECORDING_DIR"


class BatchRecorder:
    """Records each batch's shard, time, size and last sequence number; checkpoints."""

    def __init__(self) -> None:
        self.shard_id = "?"
        self.path: Path | None = None

    def _event(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = {"event": event, "shard": self.shard_id, "t": time.time(), **fields}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")

    async def initialize(self, init: InitializationInput) -> None:
        """Find the recording file of this worker."""
        self.shard_id = init.shard_id
        self.path = Path(os.environ[RECORDING_DIR]) / f"{init.worker_id}.jsonl"
        self._event("initialize", checkpoint=str(init.checkpoint))

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """One line for the batch, then a checkpoint."""
        if not batch.records:
            return
        self._event(
            "batch",
            n=len(batch.records),
            first=batch.records[0].sequence_number,
            last=batch.records[-1].sequence_number,
        )
        await batch.checkpointer.checkpoint()

    async def lease_lost(self) -> None:
        """Note it."""
        self._event("lease_lost")

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Note it."""
        self._event("shard_ended")

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Checkpoint what was delivered, then note it."""
        await checkpointer.checkpoint()
        self._event("shutdown_requested")
