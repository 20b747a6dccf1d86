"""The lander, noting when each record reaches it: the latency benchmark's processor.

``LANDER_PROCESSOR=bench.latency_probe:TimedLander`` lands exactly as the built-in
lander does, and first appends one ``id<TAB>epoch seconds`` line per record to the file
``LATENCY_LOG`` names: put -> delivered, next to put -> landed from the same worker.
"""

from __future__ import annotations

import json
import os
import time

from consumer.landing.lander import Lander
from consumer.lifecycle.processor import ProcessRecordsInput


class TimedLander(Lander):
    """:class:`Lander` that writes each record's arrival time first."""

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        if batch.records:
            now = time.time()
            lines = "".join(f"{json.loads(r.data)['id']}\t{now}\n" for r in batch.records)
            _append(os.environ["LATENCY_LOG"], lines)
        await super().process_records(batch)


def _append(path: str, lines: str) -> None:
    """A few hundred bytes a batch: written in place, not worth a thread."""
    with open(path, "a", encoding="utf-8") as log:
        log.write(lines)
