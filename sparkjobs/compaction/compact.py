"""Nightly compaction: one window of landed JSON Lines into deduplicated Parquet.

The job, for a stream and a window (a day or an hour), step by step in :func:`compact`:

1. lists the window's hour folders (and those of the dedupe horizon before it) and
   compares each hour's inputs with what is published: only *stale* hours (never compacted, or
   with late files since) are read and rewritten (:mod:`sparkjobs.compaction.plan`, pure);
2. reads the lines as text, the header parsed and the payload kept as written
   (:mod:`sparkjobs.compaction.lines`), trusting the gzip streams: a damaged one
   fails the read, and only then is every object checked and the window read again:
   truncated objects give up their complete lines, corrupt ones are left out, both are
   reported (:mod:`sparkjobs.compaction.fallback`, with :mod:`consumer.archive.codec`);
   a failure that is not the input's fails the window (:mod:`sparkjobs.compaction.damage`);
3. dedupes in one window step by :mod:`sparkjobs.compaction.dedupe`'s rule: a copy at the same
   position as the one before it is a *transport* duplicate (a replayed landing), a
   record whose event id arrived at most the horizon before it a *producer* duplicate
   (a retried put) (:mod:`sparkjobs.compaction.sparkplan`);
4. writes Parquet, one folder per hour, into a folder of its own, and publishes it by
   one Iceberg commit that replaces exactly the rewritten hours (:mod:`sparkjobs.table.table`),
   then writes the run's manifest (:mod:`sparkjobs.table.manifest`).

The job itself is described by :class:`~sparkjobs.compaction.job.CompactJob`.

Layout under ``{output}/``::

    stream={stream}/data/{run_id}/dt=D/hour=HH/part-….parquet   the table's data files
        (…/hour=HH/event_day=E/part-… when the table is partitioned by event day)
    stream={stream}/metadata/…                                  the table's metadata
    _dropped/stream={stream}/{run_id}/dt=D/hour=HH/part-….parquet  copies dedupe dropped
    _manifests/stream={stream}/{run_id}.json    what a run read, dropped and published
    catalog.db                                  the embedded catalog (local output only)
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import structlog

from consumer.archive.layout import hour_folder, hour_of
from sparkjobs.catalog import TableRef
from sparkjobs.compaction import counters, objectreader
from sparkjobs.compaction.damage import damaged_input, describe
from sparkjobs.compaction.fallback import check_inputs, triage
from sparkjobs.compaction.job import CompactionError, CompactJob, MiB, ref_for
from sparkjobs.compaction.payload_plan import PayloadPlan
from sparkjobs.compaction.plan import (
    WindowPlan,
    files_per_hour,
    has_landed_input,
    list_inputs,
    partitions_for,
    plan_window,
)
from sparkjobs.compaction.quiet import SKIPPED_FILES, TASK_FAILURE, quieted
from sparkjobs.compaction.sparkplan import DROPPED_DT, SparkPlan
from sparkjobs.compaction.typedwrite import first_payload, record, retype
from sparkjobs.io import Filesystem, Listed, filesystem_for, join
from sparkjobs.table import commits, table
from sparkjobs.table.manifest import BadFile, HourStats, RunManifest, manifest_uri, new_run_id
from sparkjobs.table.publish import HourEntry, InputFile, input_order, inputs_digest
from sparkjobs.window import hour_label, parse_hour

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BadFile",
    "CompactJob",
    "CompactionError",
    "HourStats",
    "MiB",
    "RunManifest",
    "compact",
    "has_landed_input",
    "new_run_id",
]

log = structlog.get_logger("sparkjobs.compact")


def compact(
    spark: SparkSession,
    job: CompactJob,
    fs: Filesystem | None = None,
    now: datetime | None = None,
    listed: Mapping[datetime, list[InputFile]] | None = None,
) -> RunManifest:
    """Compact one window; return (and write) the run's manifest.

    ``listed``: the archive's listing (:func:`~sparkjobs.compaction.plan.list_inputs`) when the
    caller already made it, so it is not listed twice.
    """
    fs = fs or filesystem_for(job.output, spark)
    started = time.monotonic()
    listed_at = now or datetime.now(UTC)
    manifest = RunManifest(
        new_run_id(listed_at),
        job.stream,
        job.window.label,
        job.archive,
        job.output,
        listed_at.isoformat(),
    )
    bind = log.bind(run_id=manifest.run_id, stream=job.stream, window=job.window.label)
    ref = ref_for(job)
    manifest.table = ref.identifier

    plan, index_files = _plan(spark, job, ref, manifest, listed, fs)
    manifest.timings["list_s"] = round(time.monotonic() - started, 3)
    bind.info("listed", stale=len(plan.stale), unchanged=len(plan.unchanged))
    if not plan.stale:
        manifest.status = "up-to-date"
        return manifest

    hour_stats = {
        hour: HourStats(hour, input_files=len(files), input_bytes=sum(f.size for f in files))
        for hour, files in plan.own.items()
    }
    sizes = {h: s.input_bytes for h, s in hour_stats.items()}
    partitions = partitions_for(spark.sparkContext.defaultParallelism, sizes, job.target_file_bytes)
    run_dir = join(ref.data_root, manifest.run_id)
    manifest.reader = reader_for(spark, plan)
    by_path = manifest.reader == objectreader.WHOLE and objectreader.enable_by_path(spark)
    sizes_read = {rel: f.size for rel, f in plan.read.items()}
    payload = None
    if job.typed:  # the payload sample's wall time: its Spark job is the run's first
        mark = time.monotonic()
        payload = first_payload(spark, job, ref, sizes_read)
        manifest.timings["sample_s"] = round(time.monotonic() - mark, 3)
    spark_plan = SparkPlan(
        spark,
        job,
        plan.folders,
        plan.stale,
        partitions,
        run_dir,
        index_files,
        files=files_per_hour(sizes, job.target_file_bytes),
        whole_objects=manifest.reader == objectreader.WHOLE,
        listed=plan.read if by_path else None,
        fast_header=objectreader.enable_header(spark),
        fast_counts=counters.enable(spark),
        payload=payload,
    )

    mark = time.monotonic()
    metrics = _read_and_write(spark, fs, plan, spark_plan, manifest, bind)
    if spark_plan.typing is not None:
        grown = record(spark_plan.typing, manifest, passes=1)
        if grown is not None:  # fields the sample missed, required ones left out
            bind.info(
                "payload schema changed as the rows were written; retyping",
                changes=len(grown.changes),
            )
            payload = PayloadPlan(grown.schema, spark_plan.typing.plan.timestamps)
            record(retype(spark, fs, run_dir, payload, job), manifest, passes=2)
    manifest.timings["compact_s"] = round(time.monotonic() - mark, 3)
    _count(hour_stats, metrics)
    manifest.bad_files.extend(
        spark_plan.malformed_detail(sorted(metrics.get("malformed_files", [])))
    )
    if job.strict and manifest.bad_files:
        _refuse_bad_input(fs, job, run_dir, manifest)
    if job.strict and manifest.payload.get("rescued_rows"):
        _refuse_rescued(fs, job, run_dir, manifest)

    found = fs.list_files(run_dir)
    written = _output_files(found)
    dropped = _move_dropped(fs, found, join(ref.dropped_root, manifest.run_id))
    fs.remove_leftovers(run_dir)  # the table's data/ holds its data files, and only them
    rewritten = _entries_written(written, dropped, plan, hour_stats, manifest)
    if payload is not None and payload.writes_columns:
        changed = commits.evolve_payload(ref, payload.schema, table_properties(job))
        manifest.payload["schema_changed"] = changed
    pointer = job.event_time_pointer
    commits.evolve_partitions(ref, job.partition, table_properties(job), event_pointer=pointer)
    _publish(fs, job, ref, manifest, rewritten, written)
    manifest.hours = [hour_stats[h] for h in plan.stale if h in manifest.published_hours]
    manifest.status = "published" if manifest.published_hours else "superseded"
    manifest.timings["total_s"] = round(time.monotonic() - started, 3)
    fs.write_atomic(manifest_uri(job.output, job.stream, manifest.run_id), manifest.to_json())
    bind.info(
        manifest.status,
        hours=len(manifest.published_hours),
        superseded=len(manifest.superseded_hours),
        input_rows=manifest.total("input_rows"),
        output_rows=manifest.total("output_rows"),
        transport=manifest.total("transport"),
        producer=manifest.total("producer"),
        sequence=manifest.total("sequence"),
        bad_files=len(manifest.bad_files),
        rescued=manifest.payload.get("rescued_rows", 0),
        seconds=manifest.timings["total_s"],
    )
    return manifest


def reader_for(spark: SparkSession, plan: WindowPlan) -> str:
    """How the run reads its objects: whole (:mod:`sparkjobs.compaction.objectreader`) when the
    session has the reader and no object is too large to hold, else as text."""
    largest = max((f.size for f in plan.read.values()), default=0)
    if largest <= objectreader.WHOLE_OBJECT_MAX_BYTES and objectreader.enable(spark):
        return objectreader.WHOLE
    return objectreader.TEXT


def _plan(  # noqa: PLR0917 - the run's parts, each used
    spark: SparkSession,
    job: CompactJob,
    ref: TableRef,
    manifest: RunManifest,
    listed: Mapping[datetime, list[InputFile]] | None,
    fs: Filesystem,
) -> tuple[WindowPlan, list[str]]:
    """Step 1: list the archive, read the published entries, decide what to rewrite and
    which horizon hours to read through their index; the index's files."""
    by_hour = listed if listed is not None else list_inputs(filesystem_for(job.archive, spark), job)
    found = table.open_table(ref, table_properties(job))
    assert found is not None
    hours = {hour_label(h) for h in [*job.window.hour_starts(), *by_hour]}
    current = table.published(found, sorted(hours))
    plan = plan_window(job, by_hour, current)
    index_files, incomplete = _index_files(fs, ref, plan)
    if incomplete:  # files gone (removed by hand, or another engine's maintenance)
        log.warning("index incomplete; reading the objects", hours=sorted(incomplete))
        plan = plan_window(job, by_hour, current, frozenset(incomplete))
        index_files, _ = _index_files(fs, ref, plan)
    manifest.stale_hours = plan.stale
    manifest.unchanged_hours = plan.unchanged
    if plan.stale:
        manifest.inputs = sorted(plan.read.values(), key=input_order)
        manifest.lookback_files = plan.lookback_files
        manifest.indexed_hours = sorted(plan.indexed)
    return plan, index_files


def _index_files(fs: Filesystem, ref: TableRef, plan: WindowPlan) -> tuple[list[str], set[str]]:
    """The Parquet files of each indexed hour (its published rows and dropped copies), and
    the hours where fewer are there than their entry counts."""
    files: list[str] = []
    incomplete: set[str] = set()
    for hour, entry in plan.indexed.items():
        folder = hour_folder(parse_hour(hour))
        rows = _parquet(fs, join(ref.data_root, entry.run_id, folder))
        dropped = _parquet(fs, join(ref.dropped_root, entry.run_id, folder))
        if len(rows) != entry.files or len(dropped) != entry.dropped:
            incomplete.add(hour)
        files.extend(rows + dropped)
    return sorted(files), incomplete


def _parquet(fs: Filesystem, folder: str) -> list[str]:
    return [item.uri for item in fs.list_files(folder) if item.uri.endswith(".parquet")]


def _read_and_write(  # noqa: PLR0917 - the run's parts, each used
    spark: SparkSession,
    fs: Filesystem,
    plan: WindowPlan,
    spark_plan: SparkPlan,
    manifest: RunManifest,
    bind: Any,
) -> dict[str, Any]:
    """Steps 2 to 4 up to the data: the fast path, else check every object and retry.

    The fast path reads everything trusting the gzip streams (an empty object cannot
    be one, so it goes straight to the check). Any failure removes what it wrote; only
    one that says the input is damaged or changed since the listing
    (:func:`~sparkjobs.compaction.damage.damaged_input`) is followed by the check and
    the second read, any other fails the window (:class:`CompactionError`, one line).
    Spark's loggers of a failed task are quiet for the fast read
    (:mod:`sparkjobs.compaction.quiet`): damage is said here in one line, any other
    failure logged here with its whole text.
    """
    if all(f.size for f in plan.read.values()):
        try:
            with quieted(spark, TASK_FAILURE):
                return spark_plan.run(sorted(plan.read), [], tolerant=False)
        except Exception as exc:  # removes what it wrote; damaged_input decides the rest
            fs.delete(spark_plan.run_dir)
            if not damaged_input(exc):
                bind.error("read failed", error=str(exc))
                raise _failed(spark_plan, exc) from exc
            bind.warning("damaged input; checking every input object", error=describe(exc))
    checked = time.monotonic()
    checks = check_inputs(spark, plan.folders) if plan.folders else {}
    manifest.timings["check_s"] = round(time.monotonic() - checked, 3)
    found = triage(plan.read, checks)
    manifest.bad_files.extend(found.bad)
    try:
        with quieted(spark, SKIPPED_FILES):  # damaged objects the check found, skipped
            return spark_plan.run(found.good, found.saved, tolerant=True)
    except Exception as exc:  # whatever it is, the checked read failed: so does the window
        fs.delete(spark_plan.run_dir)
        raise _failed(spark_plan, exc) from exc


def _failed(spark_plan: SparkPlan, exc: BaseException) -> CompactionError:
    """The window's failure, in one line (:func:`~sparkjobs.compaction.damage.describe`)."""
    return CompactionError(f"compacting {spark_plan.job.window.label} failed: {describe(exc)}")


def _count(hour_stats: dict[str, HourStats], metrics: dict[str, Any]) -> None:
    """Each rewritten hour's rows by cause, from what the Spark plan observed."""
    for hour, stats in hour_stats.items():
        stats.output_rows = int(metrics.get(f"kept|{hour}", 0))
        stats.transport = int(metrics.get(f"transport|{hour}", 0))
        stats.producer = int(metrics.get(f"producer|{hour}", 0))
        stats.sequence = int(metrics.get(f"sequence|{hour}", 0))
        stats.malformed = int(metrics.get(f"malformed|{hour}", 0))
        stats.input_rows = (
            stats.output_rows + stats.transport + stats.producer + stats.sequence + stats.malformed
        )


def _refuse_bad_input(
    fs: Filesystem, job: CompactJob, run_dir: str, manifest: RunManifest
) -> NoReturn:
    """Strict mode found bad input: remove the run's data, publish nothing."""
    fs.delete(run_dir)
    manifest.status = "failed"
    first = manifest.bad_files[0]
    raise CompactionError(
        f"strict: {len(manifest.bad_files)} bad input(s) in {job.window.label}, "
        f"first {first.file}: {first.kind} ({first.detail})"
    )


def _refuse_rescued(
    fs: Filesystem, job: CompactJob, run_dir: str, manifest: RunManifest
) -> NoReturn:
    """Strict mode found payload values that fit no column: publish nothing."""
    fs.delete(run_dir)
    manifest.status = "failed"
    rescued = manifest.payload["rescued"]
    places = ", ".join(f"{pointer} ({count})" for pointer, count in rescued.items())
    raise CompactionError(
        f"strict: {manifest.payload['rescued_rows']} record(s) in {job.window.label} have "
        f"payload values that fit no column, at {places}: declare their type "
        "(LANDER_PAYLOAD_SCHEMA) or run without --strict to keep them in rescued"
    )


def _entries_written(
    written: dict[str, list[Listed]],
    dropped: dict[str, int],
    plan: WindowPlan,
    hour_stats: dict[str, HourStats],
    manifest: RunManifest,
) -> dict[str, HourEntry]:
    """The published entry of each rewritten hour, and its files' count in the stats."""
    rewritten: dict[str, HourEntry] = {}
    for hour, stats in hour_stats.items():
        files = written.get(hour, [])
        stats.output_files = len(files)
        stats.output_bytes = sum(f.size for f in files)
        rewritten[hour] = HourEntry(
            hour=hour,
            run_id=manifest.run_id,
            listed_at=manifest.listed_at,
            inputs_digest=plan.digests[hour],
            inputs=len(plan.inputs[hour]),
            rows=stats.output_rows,
            own_digest=inputs_digest(plan.own[hour]),
            files=len(files),
            dropped=dropped.get(hour, 0),
        )
    return rewritten


def table_properties(job: CompactJob) -> dict[str, str]:
    """What a new table records about its writer: file size and compression."""
    return {
        "write.target-file-size-bytes": str(job.target_file_bytes),
        "write.parquet.compression-codec": job.compression,
    }


def _publish(  # noqa: PLR0917 - the run's parts, each used
    fs: Filesystem,
    job: CompactJob,
    ref: TableRef,
    manifest: RunManifest,
    rewritten: dict[str, HourEntry],
    written: dict[str, list[Listed]],
) -> None:
    """One commit that makes the run's hours current (those no newer run took meanwhile)."""
    mark, cpu = time.monotonic(), time.process_time()
    files = {hour: [f.uri for f in items] for hour, items in written.items()}
    committed = table.replace_hours(ref, rewritten, files, manifest.run_id, table_properties(job))
    manifest.published_hours = committed.hours
    manifest.superseded_hours = committed.superseded
    manifest.snapshot_id = committed.snapshot_id
    manifest.commit_attempts = committed.attempts
    manifest.timings["publish_s"] = round(time.monotonic() - mark, 3)
    # The commit is all Python (file footers, manifests, the catalog): this process's CPU.
    manifest.timings["publish_cpu_s"] = round(time.process_time() - cpu, 3)
    if not committed.hours:
        fs.delete(join(ref.data_root, manifest.run_id))
        fs.delete(join(ref.dropped_root, manifest.run_id))
    elif committed.superseded:
        for hour in committed.superseded:
            fs.delete(join(ref.data_root, manifest.run_id, hour_folder(parse_hour(hour))))
            fs.delete(join(ref.dropped_root, manifest.run_id, hour_folder(parse_hour(hour))))


def _output_files(found: list[Listed]) -> dict[str, list[Listed]]:
    """The Parquet files a run wrote for the table (``found``: its folder listed), by hour."""
    by_hour: dict[str, list[Listed]] = defaultdict(list)
    for item in found:
        if item.uri.endswith(".parquet") and f"/dt={DROPPED_DT}" not in item.uri:
            by_hour[_hour_label_of(item.uri)].append(item)
    return {hour: sorted(files, key=lambda f: f.uri) for hour, files in by_hour.items()}


def _move_dropped(fs: Filesystem, found: list[Listed], target: str) -> dict[str, int]:
    """Move the dropped copies the run wrote (``dt=dropped-D/hour=HH/`` among ``found``,
    its folder listed) out of the table's folder to ``target/dt=D/hour=HH/``; how many
    files each hour has there."""
    moved: dict[str, int] = defaultdict(int)
    days: set[str] = set()
    for item in found:
        at = item.uri.find(f"/dt={DROPPED_DT}")
        if at < 0 or not item.uri.endswith(".parquet"):
            continue
        rest = item.uri[at + len(f"/dt={DROPPED_DT}") :]  # D/hour=HH/part-….parquet
        day, _, tail = rest.partition("/")
        days.add(item.uri[:at] + f"/dt={DROPPED_DT}{day}")
        fs.move(item.uri, join(target, f"dt={day}", tail))
        moved[_hour_label_of(f"dt={day}/{tail}")] += 1
    for folder in days:
        fs.delete(folder)
    return dict(moved)


def _hour_label_of(path: str) -> str:
    hour = hour_of(path)
    if hour is None:
        raise ValueError(f"an output file outside dt=/hour=: {path}")
    return hour_label(hour)
