"""A record processor for tests: writes every call it receives to a JSON Lines file.

Each worker process appends to ``$RECORDING_DIR/<worker_id>.jsonl`` one line per
delivered record and per lifecycle call, with the wall time, so a test can check
afterwards which worker saw which record when. It checkpoints after every batch, or
every ``$RECORDING_CHECKPOINT_SECONDS`` seconds (to leave a redelivery window).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    ProcessRecordsInput,
)


class RecordingProcessor:
    """Records, then checkpoints."""

    def __init__(self) -> None:
        self.shard_id = "?"
        self.worker_id = "?"
        self.every = float(os.environ.get("RECORDING_CHECKPOINT_SECONDS", "0"))
        self.last_checkpoint = time.monotonic()
        self.path: Path | None = None

    def _write(self, lines: list[dict[str, Any]]) -> None:
        assert self.path is not None
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())

    def _event(self, event: str, **fields: Any) -> None:
        self._write([{"event": event, "shard": self.shard_id, "t": time.time(), **fields}])

    async def initialize(self, init: InitializationInput) -> None:
        """Remember who we are."""
        self.shard_id, self.worker_id = init.shard_id, init.worker_id
        self.path = Path(os.environ["RECORDING_DIR"]) / f"{init.worker_id}.jsonl"
        self._event("initialize", checkpoint=str(init.checkpoint))

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Write one line per record, then maybe checkpoint."""
        now = time.time()
        if batch.records:
            self._write(
                [
                    {
                        "event": "record",
                        "shard": self.shard_id,
                        "t": now,
                        "seq": record.sequence_number,
                        "sub": record.position.subsequence,
                        "data": record.data.decode("utf-8", "replace"),
                    }
                    for record in batch.records
                ]
            )
        if batch.records and time.monotonic() - self.last_checkpoint >= self.every:
            await batch.checkpointer.checkpoint()
            self.last_checkpoint = time.monotonic()

    async def lease_lost(self) -> None:
        """Note it."""
        self._event("lease_lost")

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Note it."""
        self._event("shard_ended")

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Checkpoint what was recorded."""
        await checkpointer.checkpoint()
        self._event("shutdown_requested")
