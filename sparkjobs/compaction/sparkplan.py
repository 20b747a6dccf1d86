"""The Spark side of one compaction run: read, prepare, dedupe, write.

One scan, two shuffles. Only what the dedupe needs crosses the first: the key, the
order, a file hash for ties, the output columns. Positions are compared after it (lag
over the same window). The second gathers each hour's rows into as many tasks as the
hour has target-sized files (:func:`sparkjobs.compaction.plan.files_per_hour`), one
task per file (:mod:`sparkjobs.compaction.distribute`), so a small hour is one file,
not one per dedupe partition (a day on 16 cores was 384 files of a few hundred KiB):
what Iceberg's Spark writer does by distributing by partition.

- :func:`_read_lines` reads the landed lines as text and splits them
  (:mod:`sparkjobs.compaction.lines`), with the lines saved from truncated objects
  (:mod:`sparkjobs.compaction.fallback`);
- :func:`_prepare` parses, validates and keys every line, counting malformed ones;
- :func:`_label` gives each line its fate by :mod:`sparkjobs.compaction.dedupe`'s rule: a copy at
  the same position as the one before it is a *transport* duplicate (a replayed
  landing), a record whose event id arrived at most the horizon before it a *producer*
  duplicate (a retried put), one without an event id whose producer sequence (partition
  key and number) did a *sequence* duplicate, the rest are kept;
- :func:`_write` writes the kept lines as Parquet by ``dt``/``hour`` (event days apart,
  :mod:`.eventtime`) in the run's folder, counting per hour and cause; the dropped copies go
  to ``dt=dropped-…`` folders beside them, in the same pass, only what dedupe compares
  (:func:`sparkjobs.compaction.compact.compact` moves them out of the table's folder);
- :func:`sparkjobs.compaction.sparkkeys.index_rows` reads the horizon hours that have an index
  (their published rows and dropped copies) as lines of no hour, instead of their
  landed objects; :func:`sparkjobs.compaction.sparkkeys.dedupe_key` keys every line.

:class:`SparkPlan` runs these for :func:`sparkjobs.compaction.compact.compact`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as sf

from consumer.archive.codec import GLOB
from consumer.archive.layout import KEY_DEPTH
from sparkjobs.compaction import counters, eventtime
from sparkjobs.compaction.counters import CAUSES, KEPT, MALFORMED, PRODUCER, SEQUENCE, TRANSPORT
from sparkjobs.compaction.distribute import first_groups, task_keys
from sparkjobs.compaction.fallback import SavedLine
from sparkjobs.compaction.job import CompactJob
from sparkjobs.compaction.lines import parse
from sparkjobs.compaction.objectreader import FUNCTION, listed_objects, literal_rows
from sparkjobs.compaction.payload_plan import PayloadPlan
from sparkjobs.compaction.plan import hour_label_of
from sparkjobs.compaction.sparkkeys import BAD_LINE, BY_EVENT, BY_SEQUENCE, dedupe_key, index_rows
from sparkjobs.compaction.typedwrite import Typing, plain_columns
from sparkjobs.table.manifest import BadFile
from sparkjobs.table.publish import InputFile
from sparkjobs.table.schema import COMPACTED, CORRUPT, field_ids, written

SEQUENCE_DIGITS = 128
"""Kinesis sequence numbers have at most 128 digits and no leading zero, so they sort
as numbers by (length, text): cheaper to carry through a shuffle than padded text."""


def _read_lines(
    spark: SparkSession,
    folders: list[str],
    good: list[str],
    recovered: list[SavedLine],
    *,
    tolerant: bool,
    payload_format: str,
    whole_objects: bool = False,
    listed: DataFrame | None = None,
    fast_header: bool = False,
) -> DataFrame:
    """Landed lines of the objects in ``good``, plus the lines saved from truncated ones.

    Read as text and split by :func:`sparkjobs.compaction.lines.parse`: the header parsed, the
    payload kept as written. Not ``tolerant``, a damaged object fails the read (the fast
    path: nothing is checked up front). ``tolerant``, the caller has already classified
    every object and only the lines of those in ``good`` are kept (the text reader skips
    what it cannot decode; the object reader decodes only ``good``). ``whole_objects``: read
    by :mod:`sparkjobs.compaction.objectreader` (each object whole, split in the JVM) instead of
    Spark's text reader; the same rows. ``listed``: those objects' lines as
    :func:`sparkjobs.compaction.objectreader.listed_objects` reads them (by path, no folder listed).
    ``fast_header``: see :func:`sparkjobs.compaction.lines.parse`.
    """
    path = sf.col("_metadata.file_path")
    reader = (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", GLOB)
        .option("ignoreCorruptFiles", str(tolerant).lower())
    )
    # dt=…/hour=…/minute=…/shard=…/name: the key's last parts, no regex per row.
    rel = sf.substring_index(path, "/", -KEY_DEPTH).alias("rel")
    landed = sf.col("_metadata.file_modification_time").alias("landed_ts")
    # Each object's hour comes from its key, parsed here once per object by the
    # archive's layout, and joins its lines (rel is unique: no row is duplicated).
    if listed is not None:
        lines = listed.select(sf.col("line").cast("string").alias("value"), *listed.columns[1:])
    elif whole_objects:
        # Joined before the lines are made: an object outside ``good`` is never decoded.
        objects = reader.format("binaryFile").load(folders).select("content", rel, landed)
        split = objects.join(sf.broadcast(_labels(spark, good)), "rel").select(
            sf.explode(sf.call_function(FUNCTION, "content")).alias("line"),
            "rel",
            "landed_ts",
            "label",
        )
        lines = split.select(sf.col("line").cast("string").alias("value"), *split.columns[1:])
    else:
        lines = reader.text(folders).select("value", rel, landed)
        lines = lines.join(sf.broadcast(_labels(spark, good)), "rel")
    if recovered:
        saved = spark.createDataFrame(
            [(value, rel, when) for rel, value, when in recovered],
            "value string, rel string, landed_ts timestamp",
        )
        labels = _labels(spark, sorted({rel for rel, _, _ in recovered}))
        lines = lines.unionByName(saved.join(sf.broadcast(labels), "rel"))
    return parse(lines, payload_format, fast_header=fast_header)


def _labels(spark: SparkSession, rels: list[str]) -> DataFrame:
    """``rel``, ``label`` (its hour) of each object, built in the JVM (no Python worker)."""
    return literal_rows(spark, ((rel, hour_label_of(rel)) for rel in rels), ("rel", "label"))


def _problem(stream: str) -> Column:
    """Why a line is not a landed record of ``stream`` (null when it is one)."""
    return (
        sf.when(sf.col(CORRUPT).isNotNull(), sf.lit("not a JSON object"))
        .when(sf.col("data_problem").isNotNull(), sf.col("data_problem"))
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


def _prepare(
    lines: DataFrame,
    stream: str,
    hours: list[str],
    observation: Any,
    sequence_pointer: str | None = None,
    *,
    fast_counts: bool = False,
) -> DataFrame:
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
    # A column, not an expression repeated in every counter: without common
    # subexpressions in the observed aggregates, each would evaluate it again per row.
    lines = lines.withColumn("malformed", sf.when(sf.col("problem").isNotNull(), sf.col("slot")))
    lines = lines.observe(
        observation,
        *counters.malformed_counters(hours, fast=fast_counts),
        sf.collect_set(sf.when(sf.col("malformed") >= 0, sf.col("rel"))).alias("files"),
    )
    bad = sf.col("problem").isNotNull()
    kind, key = dedupe_key(sequence_pointer)
    return lines.select(
        sf.when(bad, sf.lit(BAD_LINE)).otherwise(kind).alias("kind"),
        sf.when(bad, sf.col("rel")).otherwise(key).alias("key"),
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


DROPPED_DT = "dropped-"
"""Prefix of the ``dt`` value the dropped copies of a day are written under: a folder
of the run's own that the job moves out before it publishes."""

DROPPED_NULLED = ("partition_key", "landed_ts", "data")
"""Columns a dropped copy is written without: dedupe only compares the others (with a
sequence pointer it compares the partition key and the payload's number too, and only
``landed_ts`` is left out)."""


def _nulled(sequence_pointer: str | None) -> tuple[str, ...]:
    return DROPPED_NULLED if sequence_pointer is None else ("landed_ts",)


def _label(prepared: DataFrame, partitions: int, horizon_minutes: int) -> DataFrame:
    """Each line's fate (``cause``): KEPT, TRANSPORT, PRODUCER or MALFORMED.

    :mod:`sparkjobs.compaction.dedupe`'s rule in one window step: lines sharing a key (event id,
    else position) are ordered by arrival, shard, sequence number (as a number),
    subsequence and file. A line at the same position as the line before it is a
    transport duplicate; a line with an event id that arrived at most the horizon after
    the line before it is a producer duplicate; the rest are kept.
    """
    order = SparkWindow.partitionBy("key", "kind").orderBy(
        "arrival", "shard_id", "seq_len", "sequence_number", "subsequence_number", "file"
    )
    previous = sf.lag("arrival").over(order)
    same_position = (
        (sf.lag("shard_id").over(order) == sf.col("shard_id"))
        & (sf.lag("sequence_number").over(order) == sf.col("sequence_number"))
        & (sf.lag("subsequence_number").over(order) == sf.col("subsequence_number"))
    )
    within = sf.unix_micros("arrival") - sf.unix_micros(previous) <= sf.lit(
        horizon_minutes * 60_000_000
    )
    cause = (
        sf.when(sf.col("kind") == BAD_LINE, sf.lit(MALFORMED))
        .when(previous.isNull(), sf.lit(KEPT))
        .when(same_position, sf.lit(TRANSPORT))
        .when((sf.col("kind") == BY_EVENT) & within, sf.lit(PRODUCER))
        .when((sf.col("kind") == BY_SEQUENCE) & within, sf.lit(SEQUENCE))
        .otherwise(sf.lit(KEPT))
    )
    return prepared.repartition(partitions, "key", "kind").withColumn("cause", cause)


def _write(  # noqa: PLR0917 - the run's fixed facts
    labeled: DataFrame,
    job: CompactJob,
    run_dir: str,
    hours: list[str],
    files: list[int],
    observation: Any,
    fast_counts: bool,
    payload: Typing | None = None,
) -> None:
    """Write the labeled rows; hour ``hours[i]`` as ``files[i]`` files (its dropped
    copies as one); with ``payload``, the kept rows' typed columns too."""
    # The code is a column of its own, computed once per row: as an expression inside
    # each of Spark's counters (no jar: :mod:`sparkjobs.compaction.counters`) it was evaluated
    # once per counter, 96 times a row (about a fifth of a warm day's CPU: the
    # observed aggregates share no subexpressions).
    code = sf.when(sf.col("slot") >= 0, sf.col("slot") * CAUSES + sf.col("cause"))
    rows = (
        labeled.withColumn("code", code)
        .observe(
            observation,
            *counters.cause_counters(
                hours, fast=fast_counts, sequence=job.sequence_pointer is not None
            ),
        )
        .filter((sf.col("slot") >= 0) & (sf.col("cause") != MALFORMED))
    )
    slot, kept = sf.col("slot") + 1, sf.col("cause") == KEPT
    nulled = _nulled(job.sequence_pointer)
    columns = [
        sf.lit(job.stream).alias("stream"),
        *(
            sf.when(kept, sf.col(f.name)).alias(f.name) if f.name in nulled else f.name
            for f in COMPACTED.fields
            if f.name not in ("stream", "arrival_ts")
        ),
        sf.col("arrival").alias("arrival_ts"),
    ]
    day = sf.when(kept, sf.element_at(sf.array(*[sf.lit(h[:10]) for h in hours]), slot))
    # Each file its own task (:mod:`.distribute`): hour i's rows spread over its
    # files[i] shares by position; its dropped copies go with its first share.
    shares = sf.element_at(sf.array(*[sf.lit(n) for n in files]), slot)
    share = sf.when(
        kept & (shares > 1),
        sf.pmod(sf.xxhash64("shard_id", "sequence_number", "subsequence_number"), shares).cast(
            "int"
        ),
    ).otherwise(sf.lit(0))
    tasks = sum(files)
    group = sf.element_at(sf.array(*[sf.lit(n) for n in first_groups(files)]), slot) + share
    task_key = sf.element_at(sf.array(*[sf.lit(k) for k in task_keys(tasks)]), group + 1)
    out = (
        rows.select(
            *columns,
            day.otherwise(
                sf.element_at(sf.array(*[sf.lit(DROPPED_DT + h[:10]) for h in hours]), slot)
            ).alias("dt"),
            sf.element_at(sf.array(*[sf.lit(h[11:]) for h in hours]), slot).alias("hour"),
            "seq_len",
            task_key.cast("int").alias("task_key"),
            kept.alias("kept"),
        )
        .repartition(tasks, "task_key")
        .select("*", *eventtime.columns(job, sf.col("kept")))
        .sortWithinPartitions(
            *eventtime.folders(job), "shard_id", "seq_len", "sequence_number", "subsequence_number"
        )
    )
    typed: list[Column] = []
    if payload is not None:
        # After the shuffle: only ``data`` crosses it, the typed columns are made where
        # they are written. Files of a typed run carry no field ids: every reader maps
        # their columns by the table's name mapping (Spark writes no id for a list's
        # element, and a file with some ids is read by ids alone by Iceberg's Java).
        out, typed = payload.columns(out)
    ids = {} if payload is not None or job.event_time_pointer else field_ids()
    writer = (
        out.select(
            *(written(f).alias(f.name, metadata=ids.get(f.name, {})) for f in COMPACTED.fields),
            *eventtime.written(job),
            *typed,
            *eventtime.folders(job),
        )
        .write.mode("errorifexists")
        .option("compression", job.compression)
        # No _SUCCESS marker among the table's data files (Iceberg's commit is the
        # run's marker); a writer's options reach the write's Hadoop configuration.
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    for column in plain_columns(job, payload):
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    writer.partitionBy(*eventtime.folders(job)).parquet(run_dir)


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


class SparkPlan:
    """The Spark side of one run: read, label, write; the counts it observed."""

    def __init__(  # noqa: PLR0917 - the run's fixed facts
        self,
        spark: SparkSession,
        job: CompactJob,
        folders: list[str],
        hours: list[str],
        partitions: int,
        run_dir: str,
        index_files: list[str] | None = None,
        *,
        files: Mapping[str, int] | None = None,
        whole_objects: bool = False,
        listed: Mapping[str, InputFile] | None = None,
        fast_header: bool = False,
        fast_counts: bool = False,
        payload: PayloadPlan | None = None,
    ) -> None:
        self.spark, self.job, self.folders = spark, job, folders
        self.payload = payload
        """The typed columns to write (None: none)."""
        self.typing: Typing | None = None
        self.hours, self.partitions, self.run_dir = hours, partitions, run_dir
        self.files = [(files or {}).get(hour, 1) for hour in hours]
        """How many files each hour is written as, in the order of ``hours``."""
        self.index_files = index_files or []
        """The Parquet files of the horizon hours read through their index."""
        self.whole_objects = whole_objects
        """Read objects whole (:mod:`sparkjobs.compaction.objectreader`), not with the text
        reader."""
        self.listed = listed
        self.fast_header = fast_header
        """Lines in the lander's exact form split by the jar
        (:func:`sparkjobs.compaction.lines.parse`)."""
        self.fast_counts = fast_counts
        """Counts by the jar's one aggregate (:mod:`sparkjobs.compaction.counters`)."""
        self._lines: DataFrame | None = None

    def run(self, good: list[str], saved: list[SavedLine], *, tolerant: bool) -> dict[str, Any]:
        """Compact ``good`` objects and ``saved`` lines; the counts by cause and hour."""
        if not good and not saved:
            return {}
        by_path = None  # the first read: the objects of the listing, by path
        if self.listed is not None and not tolerant:
            by_path = listed_objects(self.spark, self.job.source, [self.listed[r] for r in good])
        lines = _read_lines(
            self.spark,
            self.folders,
            good,
            saved,
            tolerant=tolerant,
            payload_format=self.job.payload_format,
            whole_objects=self.whole_objects,
            listed=by_path,
            fast_header=self.fast_header,
        )
        before = Observation("malformed")
        after = Observation("causes")
        pointer = self.job.sequence_pointer
        fast = self.fast_counts
        prepared = _prepare(lines, self.job.stream, self.hours, before, pointer, fast_counts=fast)
        if self.index_files:
            prepared = prepared.unionByName(index_rows(self.spark, self.index_files, pointer))
        self.typing = Typing(self.payload) if self.payload is not None else None
        _write(
            _label(prepared, self.partitions, self.job.horizon_minutes),
            self.job,
            self.run_dir,
            self.hours,
            self.files,
            after,
            fast,
            self.typing,
        )
        found: dict[str, Any] = counters.cause_counts(
            after.get, self.hours, fast=fast, sequence=pointer is not None
        )
        malformed = before.get
        for hour, count in counters.malformed_counts(malformed, self.hours, fast=fast).items():
            found[f"malformed|{hour}"] = count
        found["malformed_files"] = list(malformed["files"] or [])
        self._lines = lines
        return found

    def malformed_detail(self, rels: list[str]) -> list[BadFile]:
        """Per file and reason counts of malformed lines (only those files read again)."""
        if not rels or self._lines is None:
            return []
        return _malformed_detail(self.spark, self._lines, self.job.stream, rels)
