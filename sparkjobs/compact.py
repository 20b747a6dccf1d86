"""Nightly compaction: one window of landed JSON Lines into deduplicated Parquet.

The job, for a stream and a window (a day or an hour):

1. lists the window's hour folders (and the lookback minutes before each) and compares
   each hour's inputs with what is published: only *stale* hours (never compacted, or
   with late files since) are read and rewritten;
2. reads the lines with an explicit schema, trusting the gzip streams: a damaged one
   fails the read, and only then is every object checked (:mod:`sparkjobs.integrity`)
   and the window read again: truncated objects give up their complete lines, corrupt
   ones are left out, both are reported;
3. dedupes in one window step: records sharing an event id, or a position when they
   have none, keep the earliest arrival. A dropped copy at the same position as the
   copy before it is a *transport* duplicate (a replayed landing), any other a
   *producer* duplicate (a retried put);
4. writes Parquet partitioned by ``dt``/``hour`` into a folder of its own, then the
   run's manifest, then the pointer that publishes it (:mod:`sparkjobs.publish`).

Layout under ``{output}/stream={stream}/``::

    _runs/{run_id}/dt=D/hour=HH/part-….parquet   data, never modified
    _manifests/{run_id}.json                      what a run read, dropped and wrote
    _published/dt=D.json, _published/dt=D/hour=HH.json   pointers readers follow
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as sf

from consumer.archive.layout import (
    hour_folder,
    hour_of,
    minute_folder,
    parse_relative,
    stream_folder,
)
from sparkjobs import compacted, publish
from sparkjobs.integrity import FileCheck, check_gzip, recover_lines
from sparkjobs.io import Filesystem, Listed, filesystem_for, join
from sparkjobs.publish import HourEntry, InputFile, OutputFile
from sparkjobs.schema import COMPACTED, CORRUPT, LANDED
from sparkjobs.window import Window, hour_label, lookback

log = structlog.get_logger("sparkjobs.compact")

MiB = 1 << 20
SEQUENCE_DIGITS = 128
"""Kinesis sequence numbers have at most 128 digits and no leading zero, so they sort
as numbers by (length, text): cheaper to carry through a shuffle than padded text."""


class CompactionError(RuntimeError):
    """The window could not be compacted (strict mode found bad input, or I/O failed)."""


@dataclass(frozen=True, slots=True)
class CompactJob:
    """One compaction: which archive, stream and window, and where the Parquet goes."""

    archive: str
    stream: str
    window: Window
    output: str
    target_file_bytes: int = 256 * MiB
    lookback_minutes: int = 10
    strict: bool = False
    compression: str = "snappy"

    @property
    def source(self) -> str:
        """The stream's folder in the archive."""
        return join(self.archive, stream_folder(self.stream))

    @property
    def target(self) -> str:
        """The stream's folder in the output."""
        return join(self.output, stream_folder(self.stream))


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
    malformed: int = 0
    output_rows: int = 0
    output_files: int = 0
    output_bytes: int = 0


@dataclass(slots=True)
class RunManifest:
    """One compaction run, as written to ``_manifests/{run_id}.json``."""

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
    timings: dict[str, float] = field(default_factory=dict)

    def total(self, name: str) -> int:
        """A counter summed over the rewritten hours."""
        return sum(int(getattr(hour, name)) for hour in self.hours)

    def to_json(self) -> bytes:
        """The manifest file's bytes."""
        body = asdict(self)
        body["totals"] = {
            name: self.total(name)
            for name in (
                "input_files",
                "input_rows",
                "transport",
                "producer",
                "malformed",
                "output_rows",
                "output_files",
                "output_bytes",
            )
        }
        return json.dumps(body, indent=1, sort_keys=True).encode() + b"\n"


def new_run_id(now: datetime) -> str:
    """Sortable by time, unique across concurrent runs."""
    return f"{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}"


# --- listing and state ------------------------------------------------------------


def _list_inputs(fs: Filesystem, job: CompactJob) -> dict[datetime, list[InputFile]]:
    """Landed objects by hour, for the window's hours and the hours its lookback reaches."""
    hours = set(job.window.hour_starts())
    if job.lookback_minutes:
        hours |= {
            m.replace(minute=0) for h in list(hours) for m in lookback(h, job.lookback_minutes)
        }
    found: dict[datetime, list[InputFile]] = {}
    for hour in sorted(hours):
        files: list[InputFile] = []
        for item in fs.list_files(join(job.source, hour_folder(hour))):
            where = parse_relative(item.uri)
            if where is not None and where.hour == hour:
                files.append(InputFile(where.rel, item.size, item.modified_ms))
        found[hour] = sorted(files)
    return found


def has_landed_input(fs: Filesystem, job: CompactJob) -> bool:
    """Whether any hour of the window itself holds a landed object (lookback not counted).

    Lists hour by hour and stops at the first object, so a busy window costs one listing;
    ``lander compact`` asks before it starts Spark when the archive is local.
    """
    for hour in job.window.hour_starts():
        for item in fs.list_files(join(job.source, hour_folder(hour))):
            where = parse_relative(item.uri)
            if where is not None and where.hour == hour:
                return True
    return False


def _inputs_of(
    hour: datetime, by_hour: dict[datetime, list[InputFile]], minutes: int
) -> list[InputFile]:
    """The objects an hour's result depends on: its own and its lookback minutes'."""
    own = list(by_hour.get(hour, []))
    wanted = {minute_folder(m) for m in lookback(hour, minutes)}
    for files in by_hour.values():
        own.extend(f for f in files if _minute_folder_of(f.rel) in wanted)
    return sorted(set(own))


def pointer_uri(job: CompactJob) -> str:
    """Where this job's window is published."""
    published = join(job.target, "_published")
    if job.window.hours == 1:
        return join(published, f"{hour_folder(job.window.start)}.json")
    return join(published, f"dt={job.window.day:%Y-%m-%d}.json")


# --- integrity ----------------------------------------------------------------------


def _check_partition(rows: Iterable[Any]) -> Iterator[tuple[str, str, int, str, list[str]]]:
    """Executor side: classify each object; recover the lines of truncated ones."""
    for row in rows:
        where = parse_relative(row.path)
        if where is None:
            continue
        body = bytes(row.content)
        check: FileCheck = check_gzip(body)
        recovered = recover_lines(body) if check.status == "truncated" else []
        yield where.rel, check.status, check.lines, check.reason, recovered


def _check_inputs(
    spark: SparkSession, folders: list[str]
) -> dict[str, tuple[str, int, str, list[str]]]:
    frame = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl.gz")
        .load(folders)
    )
    checked = frame.select("path", "content").rdd.mapPartitions(_check_partition).collect()
    return {
        rel: (status, lines, reason, recovered) for rel, status, lines, reason, recovered in checked
    }


# --- the Spark plan -----------------------------------------------------------------
#
# One scan, one shuffle. Only what the dedupe needs crosses the shuffle: the key, the
# order, a file hash for ties, the output columns. Positions are compared after it
# (lag over the same window), and each task writes its share of every hour, so no
# second shuffle sizes files: an hour gets as many files as the window has partitions.

_BY_EVENT, _BY_POSITION, _BAD_LINE = 0, 1, 2
"""What a line's dedupe key is: its event id, its position, or (malformed) its file."""


def _read_lines(
    spark: SparkSession,
    folders: list[str],
    good: list[str],
    recovered: list[tuple[str, str, datetime]],
    *,
    tolerant: bool,
) -> DataFrame:
    """Landed lines of the objects in ``good``, plus the lines saved from truncated ones.

    Not ``tolerant``, a damaged object fails the read (the fast path: nothing is checked
    up front). ``tolerant``, the reader skips what it cannot decode; the caller has
    already classified every object and lists only sound ones in ``good``.
    """
    path = sf.col("_metadata.file_path")
    read = (
        spark.read.schema(LANDED)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl.gz")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("ignoreCorruptFiles", str(tolerant).lower())
        .json(folders)
        .select(
            "*",
            # dt=…/hour=…/minute=…/shard=…/name: the last five parts, no regex per row.
            sf.substring_index(path, "/", -5).alias("rel"),
            sf.col("_metadata.file_modification_time").alias("landed_ts"),
        )
    )
    # Each object's hour comes from its key, parsed here once per object by the
    # archive's layout, and joins its lines (rel is unique: no row is duplicated).
    wanted = spark.createDataFrame(
        [(rel, _hour_label(rel)) for rel in good], "rel string, label string"
    )
    lines = read.join(sf.broadcast(wanted), "rel")
    if recovered:
        saved = spark.createDataFrame(
            [(rel, _hour_label(rel), value, when) for rel, value, when in recovered],
            "rel string, label string, value string, landed_ts timestamp",
        )
        parsed = saved.select(
            sf.from_json(
                "value", LANDED, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
            ).alias("r"),
            "rel",
            "label",
            "landed_ts",
        ).select("r.*", "rel", "label", "landed_ts")
        lines = lines.unionByName(parsed)
    return lines


def _minute_folder_of(rel: str) -> str:
    where = parse_relative(rel)
    if where is None:
        raise ValueError(f"not a landed object's key: {rel}")
    return minute_folder(where.minute)


def _hour_label(rel: str) -> str:
    where = parse_relative(rel)
    if where is None:
        raise ValueError(f"not a landed object's key: {rel}")
    return hour_label(where.hour)


def _problem(stream: str) -> Column:
    """Why a line is not a landed record of ``stream`` (null when it is one)."""
    return (
        sf.when(sf.col(CORRUPT).isNotNull(), sf.lit("not a JSON object"))
        .when(sf.col("stream").isNull(), sf.lit("missing stream"))
        .when(sf.col("stream") != sf.lit(stream), sf.lit("another stream"))
        .when(sf.col("shard_id").isNull(), sf.lit("missing shard_id"))
        .when(
            ~sf.coalesce(
                sf.col("sequence_number").rlike(f"^[0-9]{{1,{SEQUENCE_DIGITS}}}$"), sf.lit(False)
            ),
            sf.lit("bad sequence_number"),
        )
        .when(sf.col("subsequence_number").isNull(), sf.lit("missing subsequence_number"))
        .when(sf.col("arrival").isNull(), sf.lit("bad arrival_ts"))
    )


def _prepare(lines: DataFrame, stream: str, hours: list[str], observation: Any) -> DataFrame:
    """Parse, validate and key every line; count malformed ones before the shuffle.

    ``slot`` is the index of the line's hour in ``hours`` (the hours being rewritten),
    or -1 for a lookback line: small integers keep the per-row work and the per-hour
    counters cheap.
    """
    label = sf.col("label")
    slots = sf.create_map(*[sf.lit(x) for i, hour in enumerate(hours) for x in (hour, i)])
    lines = lines.select(
        "*",
        sf.col("arrival_ts").try_cast("timestamp").alias("arrival"),
        sf.coalesce(slots[label], sf.lit(-1)).alias("slot"),
    ).withColumn("problem", _problem(stream))
    malformed = sf.when(sf.col("problem").isNotNull(), sf.col("slot"))
    lines = lines.observe(
        observation,
        *[sf.count(sf.when(malformed == i, 1)).alias(hour) for i, hour in enumerate(hours)],
        sf.collect_set(sf.when(malformed >= 0, sf.col("rel"))).alias("files"),
    )
    kind = (
        sf.when(sf.col("problem").isNotNull(), sf.lit(_BAD_LINE))
        .when(sf.col("event_id").isNotNull(), sf.lit(_BY_EVENT))
        .otherwise(sf.lit(_BY_POSITION))
    )
    key = (
        sf.when(sf.col("problem").isNotNull(), sf.col("rel"))
        .when(sf.col("event_id").isNotNull(), sf.col("event_id"))
        .otherwise(
            sf.concat_ws(
                "/", sf.col("shard_id"), sf.col("sequence_number"), sf.col("subsequence_number")
            )
        )
    )
    return lines.select(
        kind.alias("kind"),
        key.alias("key"),
        "slot",
        "shard_id",
        "sequence_number",
        "subsequence_number",
        "partition_key",
        "arrival",
        "landed_ts",
        "event_id",
        "data",
        sf.length("sequence_number").alias("seq_len"),
        sf.xxhash64("rel").alias("file"),
    )


KEPT, TRANSPORT, PRODUCER, MALFORMED = range(4)

UNIQUE_COLUMNS = ("sequence_number", "event_id", "arrival_ts", "data")
"""Columns (nearly) unique per row: a dictionary is built for each page and thrown away.
Without one a day compacts with ~25% less CPU into files ~2% larger."""


def _label(prepared: DataFrame, partitions: int) -> DataFrame:
    """Each line's fate (``cause``): KEPT, TRANSPORT, PRODUCER or MALFORMED.

    Lines sharing a key (event id, else position) are ordered by arrival, shard,
    sequence number (as a number), subsequence and file; the first is kept. A dropped
    line at the same position as the line before it is a transport duplicate.
    """
    order = SparkWindow.partitionBy("key", "kind").orderBy(
        "arrival", "shard_id", "seq_len", "sequence_number", "subsequence_number", "file"
    )
    same_position = (
        (sf.lag("shard_id").over(order) == sf.col("shard_id"))
        & (sf.lag("sequence_number").over(order) == sf.col("sequence_number"))
        & (sf.lag("subsequence_number").over(order) == sf.col("subsequence_number"))
    )
    cause = (
        sf.when(sf.col("kind") == _BAD_LINE, sf.lit(MALFORMED))
        .when(sf.row_number().over(order) == 1, sf.lit(KEPT))
        .when(same_position, sf.lit(TRANSPORT))
        .otherwise(sf.lit(PRODUCER))
    )
    return prepared.repartition(partitions, "key", "kind").withColumn("cause", cause)


def _observed(hours: list[str]) -> list[Column]:
    """Per hour and cause counts, gathered while the write runs (no second pass)."""
    code = sf.when(sf.col("slot") >= 0, sf.col("slot") * 4 + sf.col("cause"))
    return [
        sf.count(sf.when(code == i * 4 + cause, 1)).alias(f"{name}|{hour}")
        for i, hour in enumerate(hours)
        for cause, name in ((KEPT, "kept"), (TRANSPORT, "transport"), (PRODUCER, "producer"))
    ]


def _partitions(spark: SparkSession, sizes: dict[str, int], target_bytes: int) -> int:
    """Partitions of the dedupe, which is also the number of files each hour gets.

    Enough for the biggest hour to come out near the target size (Parquet of these
    rows is about the size of the level-1 gzip it came from), and at least one per core.
    """
    biggest = max(sizes.values(), default=0)
    return max(spark.sparkContext.defaultParallelism, math.ceil(biggest / target_bytes), 1)


def _write(
    labeled: DataFrame, job: CompactJob, run_dir: str, hours: list[str], observation: Any
) -> None:
    kept = labeled.observe(observation, *_observed(hours)).filter(
        (sf.col("slot") >= 0) & (sf.col("cause") == KEPT)
    )
    slot = sf.col("slot") + 1
    columns = [
        sf.lit(job.stream).alias("stream"),
        *(sf.col(f.name) for f in COMPACTED.fields if f.name not in ("stream", "arrival_ts")),
        sf.col("arrival").alias("arrival_ts"),
    ]
    out = kept.select(
        *columns,
        sf.element_at(sf.array(*[sf.lit(h[:10]) for h in hours]), slot).alias("dt"),
        sf.element_at(sf.array(*[sf.lit(h[11:]) for h in hours]), slot).alias("hour"),
        "seq_len",
    ).sortWithinPartitions(
        "dt", "hour", "shard_id", "seq_len", "sequence_number", "subsequence_number"
    )
    writer = (
        out.select(*(f.name for f in COMPACTED.fields), "dt", "hour")
        .write.mode("errorifexists")
        .option("compression", job.compression)
    )
    for column in UNIQUE_COLUMNS:
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    writer.partitionBy("dt", "hour").parquet(run_dir)


def _malformed_detail(
    spark: SparkSession, lines: DataFrame, stream: str, rels: list[str]
) -> list[BadFile]:
    """Per file and reason counts of malformed lines (read again, only those files)."""
    if not rels:
        return []
    labeled = lines.filter(sf.col("rel").isin(rels)).select(
        "*", sf.col("arrival_ts").try_cast("timestamp").alias("arrival")
    )
    rows = (
        labeled.select("rel", _problem(stream).alias("problem"))
        .filter(sf.col("problem").isNotNull())
        .groupBy("rel", "problem")
        .count()
        .orderBy("rel", "problem")
        .collect()
    )
    return [BadFile(r["rel"], "malformed", int(r["count"]), str(r["problem"])) for r in rows]


class _Plan:
    """The Spark side of one run: read, label, write; the counts it observed."""

    def __init__(  # noqa: PLR0917 - the run's fixed facts
        self,
        spark: SparkSession,
        job: CompactJob,
        folders: list[str],
        hours: list[str],
        partitions: int,
        run_dir: str,
    ) -> None:
        self.spark, self.job, self.folders = spark, job, folders
        self.hours, self.partitions, self.run_dir = hours, partitions, run_dir
        self._lines: DataFrame | None = None

    def run(
        self, good: list[str], saved: list[tuple[str, str, datetime]], *, tolerant: bool
    ) -> dict[str, Any]:
        """Compact ``good`` objects and ``saved`` lines; the counts by cause and hour."""
        if not good and not saved:
            return {}
        lines = _read_lines(self.spark, self.folders, good, saved, tolerant=tolerant)
        before = Observation("malformed")
        after = Observation("causes")
        prepared = _prepare(lines, self.job.stream, self.hours, before)
        _write(_label(prepared, self.partitions), self.job, self.run_dir, self.hours, after)
        found = dict(after.get)
        malformed = before.get
        for hour in self.hours:
            found[f"malformed|{hour}"] = malformed[hour]
        found["malformed_files"] = list(malformed["files"] or [])
        self._lines = lines
        return found

    def malformed_detail(self, rels: list[str]) -> list[BadFile]:
        """Per file and reason counts of malformed lines (only those files read again)."""
        if not rels or self._lines is None:
            return []
        return _malformed_detail(self.spark, self._lines, self.job.stream, rels)


# --- the job ------------------------------------------------------------------------


def compact(
    spark: SparkSession, job: CompactJob, fs: Filesystem | None = None, now: datetime | None = None
) -> RunManifest:
    """Compact one window; return (and write) the run's manifest."""
    fs = fs or filesystem_for(job.output, spark)
    source_fs = filesystem_for(job.archive, spark)
    started = time.monotonic()
    listed_at = now or datetime.now(UTC)
    run_id = new_run_id(listed_at)
    manifest = RunManifest(
        run_id, job.stream, job.window.label, job.archive, job.output, listed_at.isoformat()
    )
    bind = log.bind(run_id=run_id, stream=job.stream, window=job.window.label)

    by_hour = _list_inputs(source_fs, job)
    window_hours = job.window.hour_starts()
    inputs = {hour_label(h): _inputs_of(h, by_hour, job.lookback_minutes) for h in window_hours}
    current = compacted.entries(fs, job.output, job.stream, job.window.day)
    stale = publish.stale_hours(current, {h: publish.inputs_digest(f) for h, f in inputs.items()})
    manifest.stale_hours = stale
    manifest.unchanged_hours = sorted(set(inputs) - set(stale))
    manifest.timings["list_s"] = round(time.monotonic() - started, 3)
    bind.info("listed", stale=len(stale), unchanged=len(manifest.unchanged_hours))
    if not stale:
        manifest.status = "up-to-date"
        return manifest

    stale_starts = [h for h in window_hours if hour_label(h) in stale]
    read_files: dict[str, InputFile] = {}
    for start in stale_starts:
        read_files.update((f.rel, f) for f in inputs[hour_label(start)])
    own = {f.rel for h in stale_starts for f in by_hour.get(h, [])}
    manifest.inputs = sorted(read_files.values())
    manifest.lookback_files = len(set(read_files) - own)
    folders = sorted(
        {join(job.source, hour_folder(h)) for h in stale_starts if by_hour.get(h)}
        | {
            join(job.source, _minute_folder_of(f.rel))
            for rel, f in read_files.items()
            if rel not in own
        }
    )

    hour_stats = {
        h: HourStats(
            h,
            input_files=len(by_hour.get(_start(h), [])),
            input_bytes=sum(f.size for f in by_hour.get(_start(h), [])),
        )
        for h in stale
    }
    partitions = _partitions(
        spark, {h: s.input_bytes for h, s in hour_stats.items()}, job.target_file_bytes
    )
    run_dir = join(job.target, "_runs", run_id)
    plan = _Plan(spark, job, folders, stale, partitions, run_dir)

    mark = time.monotonic()
    metrics: dict[str, Any] | None = None
    if all(f.size for f in read_files.values()):
        # Fast path: read everything, trusting the gzip streams; a damaged one fails it.
        try:
            metrics = plan.run(sorted(read_files), [], tolerant=False)
        except Exception as exc:  # any failure: check every object, then retry
            fs.delete(run_dir)
            bind.warning("read failed; checking every input object", error=str(exc)[:500])
    if metrics is None:
        checked = time.monotonic()
        checks = _check_inputs(spark, folders) if folders else {}
        manifest.timings["check_s"] = round(time.monotonic() - checked, 3)
        good: list[str] = []
        saved: list[tuple[str, str, datetime]] = []
        for rel, item in sorted(read_files.items()):
            status, count, reason, recovered = checks.get(
                rel, ("corrupt", 0, "vanished before it was read", [])
            )
            if status == "ok":
                good.append(rel)
                continue
            manifest.bad_files.append(BadFile(rel, status, count, reason))
            if status == "truncated":
                when = datetime.fromtimestamp(item.modified_ms / 1000, UTC)
                saved.extend((rel, line, when) for line in recovered)
        try:
            metrics = plan.run(good, saved, tolerant=True)
        except Exception as exc:
            fs.delete(run_dir)
            raise CompactionError(f"compacting {job.window.label} failed: {exc}") from exc
    manifest.timings["compact_s"] = round(time.monotonic() - mark, 3)
    for hour, stats in hour_stats.items():
        stats.output_rows = int(metrics.get(f"kept|{hour}", 0))
        stats.transport = int(metrics.get(f"transport|{hour}", 0))
        stats.producer = int(metrics.get(f"producer|{hour}", 0))
        stats.malformed = int(metrics.get(f"malformed|{hour}", 0))
        stats.input_rows = stats.output_rows + stats.transport + stats.producer + stats.malformed
    manifest.bad_files.extend(plan.malformed_detail(sorted(metrics.get("malformed_files", []))))

    if job.strict and manifest.bad_files:
        fs.delete(run_dir)
        manifest.status = "failed"
        first = manifest.bad_files[0]
        raise CompactionError(
            f"strict: {len(manifest.bad_files)} bad input(s) in {job.window.label}, "
            f"first {first.file}: {first.kind} ({first.detail})"
        )

    written = _output_files(fs, run_dir)
    rewritten: dict[str, HourEntry] = {}
    for hour, stats in hour_stats.items():
        files = written.get(hour, [])
        stats.output_files = len(files)
        stats.output_bytes = sum(f.bytes for f in files)
        rewritten[hour] = HourEntry(
            hour=hour,
            run_id=run_id,
            listed_at=manifest.listed_at,
            inputs_digest=publish.inputs_digest(inputs[hour]),
            inputs=len(inputs[hour]),
            rows=stats.output_rows,
            files=tuple(files),
        )
    manifest.hours = [hour_stats[h] for h in stale]
    manifest.status = "published"
    manifest.timings["total_s"] = round(time.monotonic() - started, 3)

    mark = time.monotonic()
    fs.write_atomic(join(job.target, "_manifests", f"{run_id}.json"), manifest.to_json())
    # Read the pointers again: another run may have published while this one worked.
    pointer = publish.next_pointer(
        job.stream,
        job.window.label,
        run_id,
        inputs,
        compacted.entries(fs, job.output, job.stream, job.window.day),
        rewritten,
    )
    fs.write_atomic(pointer_uri(job), pointer.to_json())
    manifest.timings["publish_s"] = round(time.monotonic() - mark, 3)
    bind.info(
        "published",
        hours=len(stale),
        input_rows=manifest.total("input_rows"),
        output_rows=manifest.total("output_rows"),
        transport=manifest.total("transport"),
        producer=manifest.total("producer"),
        bad_files=len(manifest.bad_files),
        seconds=manifest.timings["total_s"],
    )
    return manifest


def _start(label: str) -> datetime:
    return datetime.strptime(label, "%Y-%m-%dT%H").replace(tzinfo=UTC)


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
