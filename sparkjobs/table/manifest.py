"""The run manifest: what one compaction run read, dropped and wrote.

Written to ``{output}/_manifests/stream={stream}/{run_id}.json`` after the commit that
publishes the run (outside the table's location, so no engine's orphan-file cleanup
takes it for an orphan), and returned by :func:`sparkjobs.compaction.compact.compact`. Pure.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from consumer.archive.layout import stream_folder
from sparkjobs.io import join
from sparkjobs.table.publish import InputFile

TOTALS = (
    "input_files",
    "input_rows",
    "transport",
    "producer",
    "sequence",
    "malformed",
    "output_rows",
    "output_files",
    "output_bytes",
)
"""The counters summed over the rewritten hours into the manifest's ``totals``."""


@dataclass(slots=True)
class BadFile:
    """An input object that is not a whole gzip stream, or holds malformed lines."""

    file: str
    kind: str
    lines: int
    detail: str


@dataclass(slots=True)
class HourStats:
    """What one rewritten hour read and kept."""

    hour: str
    input_files: int
    input_bytes: int
    input_rows: int = 0
    transport: int = 0
    producer: int = 0
    """Duplicates by event id (retried puts)."""
    sequence: int = 0
    """Duplicates by producer sequence (retried puts without an event id)."""
    malformed: int = 0
    output_rows: int = 0
    output_files: int = 0
    output_bytes: int = 0


@dataclass(slots=True)
class RunManifest:
    """One compaction run, as written to :func:`manifest_uri`."""

    run_id: str
    stream: str
    window: str
    archive: str
    output: str
    listed_at: str
    status: str = "running"
    stale_hours: list[str] = field(default_factory=list)
    unchanged_hours: list[str] = field(default_factory=list)
    hours: list[HourStats] = field(default_factory=list)
    bad_files: list[BadFile] = field(default_factory=list)
    inputs: list[InputFile] = field(default_factory=list)
    lookback_files: int = 0
    indexed_hours: list[str] = field(default_factory=list)
    """Horizon hours read through their index (published rows and dropped copies)
    instead of their landed objects."""
    timings: dict[str, float] = field(default_factory=dict)
    reader: str = ""
    """How the objects were read: ``objects`` (whole, split in the JVM:
    :mod:`sparkjobs.compaction.objectreader`) or ``text`` (Spark's text reader)."""
    table: str = ""
    published_hours: list[str] = field(default_factory=list)
    superseded_hours: list[str] = field(default_factory=list)
    """Hours the run rewrote but another run published from a newer listing meanwhile."""
    snapshot_id: int | None = None
    commit_attempts: int = 0
    """Commits tried: more than one when another run committed the same hours meanwhile."""
    payload: dict[str, Any] = field(default_factory=dict)
    """The typed payload columns (issue 48): passes written, the columns, the values
    rescued per place (JSON Pointer) and the rows with any, whether the schema changed."""

    def total(self, name: str) -> int:
        """A counter summed over the rewritten hours."""
        return sum(int(getattr(hour, name)) for hour in self.hours)

    def to_json(self) -> bytes:
        """The manifest file's bytes."""
        body = asdict(self)
        body["totals"] = {name: self.total(name) for name in TOTALS}
        return json.dumps(body, indent=1, sort_keys=True).encode() + b"\n"


def newest_by_hour(manifests: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """For each hour, the run id of the newest manifest (by listing, then run id) that
    published it: who made the hour, when the table's snapshots no longer say (expired).
    Manifests without ``published_hours`` (older runs) count by their rewritten hours."""
    newest: dict[str, tuple[str, str]] = {}
    for manifest in manifests:
        if manifest.get("status") != "published":
            continue
        key = (str(manifest["listed_at"]), str(manifest["run_id"]))
        hours = manifest.get("published_hours") or [h["hour"] for h in manifest["hours"]]
        for hour in hours:
            if hour not in newest or key > newest[hour]:
                newest[hour] = key
    return {hour: run_id for hour, (_, run_id) in newest.items()}


def manifest_uri(output: str, stream: str, run_id: str) -> str:
    """Where a run's manifest is written."""
    return join(output, "_manifests", stream_folder(stream), f"{run_id}.json")


def new_run_id(now: datetime) -> str:
    """Sortable by time, unique across concurrent runs."""
    return f"{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}"
