"""What a board worker reports besides its beat: its CPU use, and troubled shards.

``lander status`` shows a shard that keeps failing, with its error, from the
:class:`ShardReport` in its lease. Workers renew no leases and a failing shard does not
checkpoint, so without more its error would be in the metrics and the logs only.
:class:`TroubleReports` decides when a worker writes a report into a lease (a fenced
write, as KCL's renewal is): while the shard's processor keeps failing, or its records
have waited for a checkpoint for ``LANDER_STALL_SECONDS`` (stalled), at most once per
renew interval, and once more when it recovers, to clear it. Healthy shards cost
nothing: status shows their WAITING as not reported (``/metrics`` has it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Set

from consumer.leases.model import ShardReport


class TroubleReports:
    """When each troubled shard's report is due in its lease (pure, given ``now``)."""

    def __init__(self, interval: float, stall_seconds: float = 300.0) -> None:
        self.interval = interval
        self.stall_ms = stall_seconds * 1000
        """A shard whose records have waited this long for a checkpoint is troubled
        too (``lander status`` shows it stalled, with its count), failing or not."""
        self.written: dict[str, tuple[float, bool]] = {}
        """Per shard: when its report was last written, and whether it showed trouble."""

    def due(self, reports: Mapping[str, ShardReport], held: Set[str], now: float) -> list[str]:
        """The held shards whose report should be written now."""
        for key in set(self.written) - set(held):
            del self.written[key]
        due = []
        for key in sorted(held):
            report = reports.get(key)
            if report is None:
                continue
            troubled = self.troubled(report)
            last = self.written.get(key)
            shown = last is not None and last[1]
            stale = last is None or now - last[0] >= self.interval
            if troubled != shown or (troubled and stale):
                due.append(key)
        return due

    def troubled(self, report: ShardReport) -> bool:
        """Failing, or stalled: records wait and the checkpoint has not moved for
        ``stall_ms``."""
        stalled = report.pending > 0 and report.checkpoint_age_ms >= self.stall_ms
        return report.failures > 0 or stalled

    def wrote(self, key: str, report: ShardReport, now: float) -> None:
        """Record a report written into the lease."""
        self.written[key] = (now, self.troubled(report))


class CpuMeter:
    """This process's CPU use between two readings, in percent of one core."""

    def __init__(self) -> None:
        self._at: tuple[float, float] | None = None

    def percent(self) -> float:
        """Since the previous reading (0 at the first)."""
        now, used = time.monotonic(), time.process_time()
        then = self._at
        self._at = (now, used)
        if then is None or now <= then[0]:
            return 0.0
        return round(100 * (used - then[1]) / (now - then[0]), 1)
