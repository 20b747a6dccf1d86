"""Nightly compaction: one window of landed JSON Lines into deduplicated Parquet.

The job, for a stream and a window (a day or an hour), step by step in :func:`compact`:

1. lists the window's hour folders (and those of the dedupe horizon before it) and
   compares each hour's inputs with what is published: only *stale* hours (never compacted, or
   with late files since) are read and rewritten (:mod:`sparkjobs.plan`, pure);
2. reads the lines as text, the header parsed and the payload kept as written
   (:mod:`sparkjobs.lines`), trusting the gzip streams: a damaged one
   fails the read, and only then is every object checked and the window read again:
   truncated objects give up their complete lines, corrupt ones are left out, both are
   reported (:mod:`sparkjobs.fallback`, with :mod:`sparkjobs.integrity`);
3. dedupes in one window step by :mod:`sparkjobs.dedupe`'s rule: a copy at the same
   position as the one before it is a *transport* duplicate (a replayed landing), a
   record whose event id arrived at most the horizon before it a *producer* duplicate
   (a retried put) (:mod:`sparkjobs.sparkplan`);
4. writes Parquet partitioned by ``dt``/``hour`` into a folder of its own, then the
   run's manifest (:mod:`sparkjobs.manifest`), then the pointer that publishes it
   (:mod:`sparkjobs.publish`).

The job itself is described by :class:`~sparkjobs.job.CompactJob`.

Layout under ``{output}/stream={stream}/``::

    _runs/{run_id}/dt=D/hour=HH/part-….parquet   data, never modified
    _manifests/{run_id}.json                      what a run read, dropped and wrote
    _published/dt=D.json, _published/dt=D/hour=HH.json   pointers readers follow
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import structlog

from consumer.archive.layout import hour_of
from sparkjobs import compacted, publish
from sparkjobs.fallback import check_inputs, triage
from sparkjobs.io import Filesystem, Listed, filesystem_for, join
from sparkjobs.job import CompactionError, CompactJob, MiB, pointer_uri
from sparkjobs.manifest import BadFile, HourStats, RunManifest, new_run_id
from sparkjobs.plan import WindowPlan, has_landed_input, list_inputs, partitions_for, plan_window
from sparkjobs.publish import HourEntry, InputFile, OutputFile
from sparkjobs.sparkplan import SparkPlan
from sparkjobs.window import hour_label

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
    "pointer_uri",
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

    ``listed``: the archive's listing (:func:`~sparkjobs.plan.list_inputs`) when the
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

    plan = _plan(spark, job, fs, manifest, listed)
    manifest.timings["list_s"] = round(time.monotonic() - started, 3)
    bind.info("listed", stale=len(plan.stale), unchanged=len(plan.unchanged))
    if not plan.stale:
        manifest.status = "up-to-date"
        return manifest

    hour_stats = {
        hour: HourStats(hour, input_files=len(files), input_bytes=sum(f.size for f in files))
        for hour, files in plan.own.items()
    }
    partitions = partitions_for(
        spark.sparkContext.defaultParallelism,
        {h: s.input_bytes for h, s in hour_stats.items()},
        job.target_file_bytes,
    )
    run_dir = join(job.target, "_runs", manifest.run_id)
    spark_plan = SparkPlan(spark, job, plan.folders, plan.stale, partitions, run_dir)

    mark = time.monotonic()
    metrics = _read_and_write(spark, fs, plan, spark_plan, manifest, bind)
    manifest.timings["compact_s"] = round(time.monotonic() - mark, 3)
    _count(hour_stats, metrics)
    manifest.bad_files.extend(
        spark_plan.malformed_detail(sorted(metrics.get("malformed_files", [])))
    )
    if job.strict and manifest.bad_files:
        _refuse_bad_input(fs, job, run_dir, manifest)

    rewritten = _entries_written(fs, run_dir, plan, hour_stats, manifest)
    manifest.hours = [hour_stats[h] for h in plan.stale]
    manifest.status = "published"
    manifest.timings["total_s"] = round(time.monotonic() - started, 3)
    _publish(fs, job, plan, manifest, rewritten)
    bind.info(
        "published",
        hours=len(plan.stale),
        input_rows=manifest.total("input_rows"),
        output_rows=manifest.total("output_rows"),
        transport=manifest.total("transport"),
        producer=manifest.total("producer"),
        bad_files=len(manifest.bad_files),
        seconds=manifest.timings["total_s"],
    )
    return manifest


def _plan(
    spark: SparkSession,
    job: CompactJob,
    fs: Filesystem,
    manifest: RunManifest,
    listed: Mapping[datetime, list[InputFile]] | None,
) -> WindowPlan:
    """Step 1: list the archive, read the published entries, decide what to rewrite."""
    by_hour = listed if listed is not None else list_inputs(filesystem_for(job.archive, spark), job)
    current = compacted.entries(fs, job.output, job.stream, job.window.day)
    plan = plan_window(job, by_hour, current)
    manifest.stale_hours = plan.stale
    manifest.unchanged_hours = plan.unchanged
    if plan.stale:
        manifest.inputs = sorted(plan.read.values())
        manifest.lookback_files = plan.lookback_files
    return plan


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
    be one, so it goes straight to the check); any failure removes what it wrote.
    """
    if all(f.size for f in plan.read.values()):
        try:
            return spark_plan.run(sorted(plan.read), [], tolerant=False)
        except Exception as exc:  # any failure: check every object, then retry
            fs.delete(spark_plan.run_dir)
            bind.warning("read failed; checking every input object", error=str(exc)[:500])
    checked = time.monotonic()
    checks = check_inputs(spark, plan.folders) if plan.folders else {}
    manifest.timings["check_s"] = round(time.monotonic() - checked, 3)
    found = triage(plan.read, checks)
    manifest.bad_files.extend(found.bad)
    try:
        return spark_plan.run(found.good, found.saved, tolerant=True)
    except Exception as exc:
        fs.delete(spark_plan.run_dir)
        label = spark_plan.job.window.label
        raise CompactionError(f"compacting {label} failed: {exc}") from exc


def _count(hour_stats: dict[str, HourStats], metrics: dict[str, Any]) -> None:
    """Each rewritten hour's rows by cause, from what the Spark plan observed."""
    for hour, stats in hour_stats.items():
        stats.output_rows = int(metrics.get(f"kept|{hour}", 0))
        stats.transport = int(metrics.get(f"transport|{hour}", 0))
        stats.producer = int(metrics.get(f"producer|{hour}", 0))
        stats.malformed = int(metrics.get(f"malformed|{hour}", 0))
        stats.input_rows = stats.output_rows + stats.transport + stats.producer + stats.malformed


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


def _entries_written(
    fs: Filesystem,
    run_dir: str,
    plan: WindowPlan,
    hour_stats: dict[str, HourStats],
    manifest: RunManifest,
) -> dict[str, HourEntry]:
    """The published entry of each rewritten hour: the files the run wrote for it."""
    written = _output_files(fs, run_dir)
    rewritten: dict[str, HourEntry] = {}
    for hour, stats in hour_stats.items():
        files = written.get(hour, [])
        stats.output_files = len(files)
        stats.output_bytes = sum(f.bytes for f in files)
        rewritten[hour] = HourEntry(
            hour=hour,
            run_id=manifest.run_id,
            listed_at=manifest.listed_at,
            inputs_digest=plan.digests[hour],
            inputs=len(plan.inputs[hour]),
            rows=stats.output_rows,
            files=tuple(files),
        )
    return rewritten


def _publish(
    fs: Filesystem,
    job: CompactJob,
    plan: WindowPlan,
    manifest: RunManifest,
    rewritten: dict[str, HourEntry],
) -> None:
    """Write the manifest, then the pointer that makes the run's hours current."""
    mark = time.monotonic()
    fs.write_atomic(join(job.target, "_manifests", f"{manifest.run_id}.json"), manifest.to_json())
    # Read the pointers again: another run may have published while this one worked.
    pointer = publish.next_pointer(
        job.stream,
        job.window.label,
        manifest.run_id,
        plan.inputs,
        compacted.entries(fs, job.output, job.stream, job.window.day),
        rewritten,
    )
    fs.write_atomic(pointer_uri(job), pointer.to_json())
    manifest.timings["publish_s"] = round(time.monotonic() - mark, 3)


def _output_files(fs: Filesystem, run_dir: str) -> dict[str, list[OutputFile]]:
    """The Parquet files a run wrote, by hour, as paths relative to the stream's output."""
    by_hour: dict[str, list[OutputFile]] = defaultdict(list)
    for item in fs.list_files(run_dir):
        if item.uri.endswith(".parquet"):
            rel = "_runs/" + item.uri.split("/_runs/", 1)[1]
            by_hour[_hour_of_output(item)].append(OutputFile(rel, item.size))
    return {hour: sorted(files) for hour, files in by_hour.items()}


def _hour_of_output(item: Listed) -> str:
    hour = hour_of(item.uri)
    if hour is None:
        raise ValueError(f"an output file outside dt=/hour=: {item.uri}")
    return hour_label(hour)
