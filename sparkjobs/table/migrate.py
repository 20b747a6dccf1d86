"""Import an output published by pointer files (the format before the Iceberg table).

Before the table, a run published its window by pointer files,
``{compacted}/stream=S/_published/dt=D.json`` (a day run) and
``_published/dt=D/hour=HH.json`` (an hour run): per hour, the Parquet files that were
that hour (relative to ``stream=S/``, under ``_runs/{run_id}/``), the digest of the
inputs they were made from, and when those were listed. A reader took, for each hour,
the entry with the latest listing.

``lander migrate-pointers`` resolves the pointers the same way once and commits every
hour into the stream's table with its entry (digest, listing, run), so the next
compaction of an imported day finds its hours up to date and rewrites nothing. The
files are registered where they are: they lie under the table's location, outside the
``data/`` and ``metadata/`` folders that ``lander maintain`` cleans, so nothing of
theirs is ever deleted by it. Running it again imports nothing new: an hour already
published from the same or a newer listing is kept. The pointer files, and the
``_runs/`` folders no pointer names, are the operator's to delete once the table reads
right (the command prints how many pointer files it read). On an object store it lists and reads
through a local Spark session's Hadoop client (the Spark image has one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from consumer.archive.layout import stream_folder
from sparkjobs.catalog import TableRef, for_each_table
from sparkjobs.io import Filesystem, filesystem_for, is_local, join
from sparkjobs.settings import TableSettings
from sparkjobs.table.commits import relax_required
from sparkjobs.table.manifest import manifest_uri
from sparkjobs.table.publish import HourEntry
from sparkjobs.table.table import replace_hours

POINTER_FORMAT = 1


@dataclass(frozen=True, slots=True)
class PointerEntry:
    """One hour as a pointer file published it."""

    entry: HourEntry
    files: tuple[str, ...]
    """Parquet files relative to the stream's folder (``_runs/{run_id}/dt=…/hour=…/…``)."""

    def newer_than(self, other: PointerEntry) -> bool:
        """The old readers' rule: the later listing wins, then the larger run id."""
        return self.entry.newer_than(other.entry)


def parse_pointer(data: bytes | str) -> list[PointerEntry]:
    """The hours of one pointer file; ValueError if it is not a format-1 pointer."""
    raw: Any = json.loads(data)
    if not isinstance(raw, dict) or raw.get("format") != POINTER_FORMAT:
        raise ValueError("not a lander pointer file (format 1)")
    return [
        PointerEntry(
            HourEntry(
                hour=str(hour["hour"]),
                run_id=str(hour["run_id"]),
                listed_at=str(hour["listed_at"]),
                inputs_digest=str(hour["inputs_digest"]),
                inputs=int(hour["inputs"]),
                rows=int(hour["rows"]),
            ),
            tuple(str(f["path"]) for f in hour["files"]),
        )
        for hour in raw["hours"]
    ]


def resolve(entries: Iterable[PointerEntry]) -> dict[str, PointerEntry]:
    """For each hour, the entry the old readers used: the one with the latest listing."""
    current: dict[str, PointerEntry] = {}
    for found in entries:
        known = current.get(found.entry.hour)
        if known is None or found.newer_than(known):
            current[found.entry.hour] = found
    return current


@dataclass(frozen=True, slots=True)
class Migrated:
    """What one import did."""

    pointers: int
    hours: int
    imported: list[str]
    kept: list[str]
    """Hours the table already had from the same or a newer listing."""
    files: int


def migrate_all(settings: TableSettings) -> list[int]:
    """``lander migrate-pointers``: each stream in turn, one line each (stdout, or stderr
    when it fails); the exit code of each."""
    spark = None
    if not is_local(settings.compacted):  # listing an object store goes through Hadoop
        from sparkjobs.session import get_session

        spark = get_session(None, app="lander-migrate-pointers")

    def one(ref: TableRef) -> str:
        done = migrate(ref, filesystem_for(settings.compacted, spark))
        return (
            f"{done.pointers} pointer files, {done.hours} hours; imported "
            f"{len(done.imported)} ({done.files} files), already in the table {len(done.kept)}"
        )

    try:
        return for_each_table(settings, "migrate-pointers", one)
    finally:
        if spark is not None:
            spark.stop()


def migrate(ref: TableRef, fs: Filesystem) -> Migrated:
    """Import the stream's pointer-published hours into its table, in one commit."""
    base = join(ref.output, stream_folder(ref.stream))
    pointers = [
        item.uri for item in fs.list_files(join(base, "_published")) if item.uri.endswith(".json")
    ]
    entries = []
    for uri in sorted(pointers):
        data = fs.read(uri)
        if data is not None:
            entries.extend(parse_pointer(data))
    hours = resolve(entries)
    files = {hour: [join(base, path) for path in found.files] for hour, found in hours.items()}
    if not hours:
        return Migrated(len(pointers), 0, [], [], 0)
    # Their files were written before any column was required (those of an older lander).
    relax_required(ref)
    committed = replace_hours(
        ref,
        {hour: found.entry for hour, found in hours.items()},
        files,
        "migrate-pointers",
        keep_files=True,
    )
    _carry_manifests(ref, fs, base, {hour: hours[hour].entry.run_id for hour in committed.hours})
    return Migrated(
        len(pointers),
        len(hours),
        committed.hours,
        committed.superseded,
        sum(len(files[hour]) for hour in committed.hours),
    )


def _carry_manifests(ref: TableRef, fs: Filesystem, base: str, runs: dict[str, str]) -> None:
    """Each imported run's manifest, copied to where the analysis looks now, naming the
    hours it made as imported."""
    for run_id in sorted(set(runs.values())):
        data = fs.read(join(base, "_manifests", f"{run_id}.json"))
        if data is None:
            continue
        manifest = json.loads(data)
        manifest["published_hours"] = sorted(h for h, r in runs.items() if r == run_id)
        manifest.setdefault("status", "published")
        body = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
        fs.write_atomic(manifest_uri(ref.output, ref.stream, run_id), body)
