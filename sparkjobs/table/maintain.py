"""Table maintenance: expire old snapshots, then remove the files nothing references.

Every compaction run adds a snapshot and replaces the files of the hours it rewrote; the
replaced files stay, because readers of an older snapshot (time travel, a query that
started before the commit) may still read them. ``lander maintain`` ends that:

1. **Snapshot expiry.** Snapshots older than ``LANDER_SNAPSHOT_RETENTION`` (default 7
   days) are removed from the table's metadata; the current snapshot never is.
2. **Orphan files.** Every file under the table's ``data/`` and ``metadata/`` that no
   remaining snapshot, manifest or metadata file references, and that is older than
   ``LANDER_ORPHAN_AGE`` (default 3 days: longer than any compaction run, so the files of
   a run that has written but not yet committed are never taken), is deleted. That
   covers the files of replaced hours, of runs that crashed between their write and
   their commit, and the ``.crc``/``_SUCCESS`` files Spark leaves beside its output.
3. **Run manifests** (``_manifests/``) older than the snapshot retention of runs that
   made no hour as it is now (the newest manifest to publish an hour stays: once the
   snapshot naming the hour expires, the analysis finds the run through it).
4. **Dropped copies** (``_dropped/``, each hour's index beside its published rows)
   older than ``LANDER_ORPHAN_AGE``, except those of the run each hour's published entry
   names: a newer run has made the hour since, or the entry expired with its snapshot
   (a run then reads the hour's objects: it has no entry to trust an index by).

:func:`orphans` decides (pure); :func:`maintain` lists and deletes through the table's
own FileIO, so a ``file://`` and an ``s3://`` table are handled alike, without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import structlog
from pyarrow.fs import FileSelector, FileType
from pyiceberg.io.pyarrow import PyArrowFileIO

from consumer.archive.layout import hour_of, stream_folder
from consumer.errors import MissingError
from sparkjobs.catalog import TableRef, for_each_table, registered
from sparkjobs.io import join
from sparkjobs.settings import MaintainSettings
from sparkjobs.table.manifest import newest_by_hour
from sparkjobs.table.table import open_table, published
from sparkjobs.window import duration_minutes, hour_label

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem
    from pyiceberg.table import Table

log = structlog.get_logger("sparkjobs.maintain")


class TableNotFoundError(MissingError):
    """``lander maintain`` was given a table its catalog does not have (exit 3, one line
    naming both): never compacted, or the wrong LANDER_COMPACTED, LANDER_CATALOG or
    LANDER_TABLE. Not retriable: only a compaction makes the table."""

    retriable = False


@dataclass(frozen=True, slots=True)
class Found:
    """A file under the table's location: its URI, size and modification time (ms)."""

    uri: str
    size: int
    modified_ms: int


@dataclass(slots=True)
class Maintained:
    """What one maintenance of a table did."""

    table: str
    snapshots_expired: int = 0
    snapshots_kept: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0
    manifests_deleted: int = 0
    orphans_too_young: int = 0
    dropped_deleted: int = 0


def orphans(files: Iterable[Found], referenced: set[str], cutoff_ms: int) -> tuple[list[str], int]:
    """The files to delete: referenced by nothing, and last modified before ``cutoff_ms``;
    and how many unreferenced files are too young to delete yet."""
    old, young = [], 0
    for found in files:
        if found.uri in referenced:
            continue
        if found.modified_ms < cutoff_ms:
            old.append(found.uri)
        else:
            young += 1
    return sorted(old), young


def referenced_files(table: Table) -> set[str]:
    """Every file a snapshot or the metadata names: metadata files (current and logged),
    statistics, manifest lists, manifests, and the data files of every snapshot."""
    metadata = table.metadata
    names = {table.metadata_location}
    names.update(entry.metadata_file for entry in metadata.metadata_log)
    names.update(s.statistics_path for s in metadata.statistics)
    for snapshot in metadata.snapshots:
        names.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            names.add(manifest.manifest_path)
            names.update(
                entry.data_file.file_path
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
            )
    return {_normal(name) for name in names}


def maintain(
    ref: TableRef, now: datetime, retention: timedelta, orphan_age: timedelta
) -> Maintained:
    """Expire, then delete orphans and stale run manifests, for one stream's table;
    :class:`TableNotFoundError` if there is none (maintenance makes no table)."""
    done = Maintained(ref.identifier)
    table = open_table(ref, create=False)
    if table is None:
        raise TableNotFoundError(
            f"no such table in catalog {ref.catalog!r} (output {ref.output}): "
            "run lander compact first"
        )
    cutoff_ms = int((now - retention).timestamp() * 1000)
    heads = {ref.snapshot_id for ref in table.metadata.refs.values()}  # branches, tags
    expired = [
        s.snapshot_id
        for s in table.metadata.snapshots
        if s.timestamp_ms < cutoff_ms and s.snapshot_id not in heads
    ]
    if expired:  # no commit (no new metadata file) when nothing expires
        table.maintenance.expire_snapshots().by_ids(expired).commit()
        table = table.refresh()
    done.snapshots_expired = len(expired)
    done.snapshots_kept = len(table.metadata.snapshots)

    referenced = referenced_files(table)
    location = registered(table.location())
    fs, root = _filesystem(table, location)
    files = [
        f
        for folder in ("data", "metadata")
        for f in _listed(fs, root, location, f"{location.rstrip('/')}/{folder}")
    ]
    cutoff = int((now - orphan_age).timestamp() * 1000)
    old, done.orphans_too_young = orphans(files, referenced, cutoff)
    sizes = {f.uri: f.size for f in files}
    for uri in old:
        table.io.delete(uri)
    done.files_deleted = len(old)
    done.bytes_deleted = sum(sizes[uri] for uri in old)
    done.manifests_deleted = _prune_manifests(table, ref, now - retention)
    done.dropped_deleted = _prune_dropped(table, ref, cutoff)
    log.info(
        "maintained",
        table=ref.identifier,
        snapshots_expired=done.snapshots_expired,
        files_deleted=done.files_deleted,
        manifests_deleted=done.manifests_deleted,
    )
    return done


def maintain_all(settings: MaintainSettings) -> list[int]:
    """``lander maintain``: each stream's table in turn, one result line on stdout each
    (or one line on stderr when it fails or the table does not exist); the exit code of
    each."""
    retention = timedelta(minutes=duration_minutes(settings.snapshot_retention))
    orphan_age = timedelta(minutes=duration_minutes(settings.orphan_age))

    def one(ref: TableRef) -> str:
        done = maintain(ref, datetime.now(UTC), retention, orphan_age)
        return (
            f"snapshots expired {done.snapshots_expired}, kept {done.snapshots_kept}; files "
            f"deleted {done.files_deleted} ({done.bytes_deleted:,} bytes), unreferenced but "
            f"younger than {settings.orphan_age} {done.orphans_too_young}; run manifests "
            f"deleted {done.manifests_deleted}; dropped-copy files deleted {done.dropped_deleted}"
        )

    return for_each_table(settings, "maintain", one)


def _prune_manifests(table: Table, ref: TableRef, before: datetime) -> int:
    """Delete the run manifests older than ``before`` of runs that made no hour as it is
    now: neither named by the table's snapshots nor the newest to publish some hour (the
    analysis reads that one once the snapshot naming the hour has expired)."""
    folder = registered(join(ref.output, "_manifests", stream_folder(ref.stream)))
    fs, root = _filesystem(table, folder)
    found = [f for f in _listed(fs, root, folder, folder) if f.uri.endswith(".json")]
    manifests = []
    for item in found:
        with table.io.new_input(item.uri).open() as stream:
            manifests.append(json.loads(stream.read()))
    keep = {entry.run_id for entry in published(table).values()}
    keep.update(newest_by_hour(manifests).values())
    cutoff = int(before.timestamp() * 1000)
    deleted = 0
    for item, manifest in zip(found, manifests, strict=True):
        if manifest.get("run_id") not in keep and item.modified_ms < cutoff:
            table.io.delete(item.uri)
            deleted += 1
    return deleted


def _prune_dropped(table: Table, ref: TableRef, cutoff_ms: int) -> int:
    """Delete the dropped copies (``_dropped/stream=S/{run}/dt=D/hour=HH/``) last
    modified before ``cutoff_ms``, except those of the run each hour's entry names."""
    folder = registered(ref.dropped_root)
    fs, root = _filesystem(table, folder)
    live = {(entry.run_id, hour) for hour, entry in published(table).items()}
    deleted = 0
    for item in _listed(fs, root, folder, folder):
        # …/_dropped/stream=S/{run}/dt=D/hour=HH/part-….parquet
        parts = item.uri.rsplit("/_dropped/", 1)[-1].split("/")
        run = parts[1] if len(parts) > 1 else ""
        hour = hour_of(item.uri)
        label = hour_label(hour) if hour is not None else ""
        if (run, label) not in live and item.modified_ms < cutoff_ms:
            table.io.delete(item.uri)
            deleted += 1
    return deleted


def _filesystem(table: Table, location: str) -> tuple[FileSystem, str]:
    """The pyarrow filesystem the table's FileIO uses for ``location``, and the path of
    ``location`` on it."""
    io = table.io if isinstance(table.io, PyArrowFileIO) else PyArrowFileIO(table.io.properties)
    scheme, netloc, path = io.parse_location(location)
    return io.fs_by_scheme(scheme, netloc), path


def _listed(fs: FileSystem, root: str, location: str, folder: str) -> list[Found]:
    """Every file under ``folder`` (a URI below ``location``, whose path on ``fs`` is
    ``root``), as URIs spelled like ``location``."""
    base = location.rstrip("/")
    below = folder.rstrip("/")[len(base) :]
    selector = FileSelector(root.rstrip("/") + below, recursive=True, allow_not_found=True)
    found = []
    for info in fs.get_file_info(selector):
        if info.type != FileType.File:
            continue
        rest = info.path[len(root.rstrip("/")) :]
        modified = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        found.append(Found(_normal(base + rest), info.size or 0, modified))
    return found


def _normal(uri: str) -> str:
    """One spelling per file: ``file:/x`` and ``file:///x`` alike, ``s3a`` as ``s3``."""
    uri = registered(uri)
    if uri.startswith("file:/") and not uri.startswith("file:///"):
        uri = "file:///" + uri[len("file:/") :].lstrip("/")
    return uri
