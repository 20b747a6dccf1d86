"""A run's typed payload columns (issue 48): the schema it starts with, the columns a
pass writes and what it observed, and the rewrite when the window had more.

:func:`first_payload` decides the schema before the run reads (the table's, the
declared, a sample's: :mod:`sparkjobs.compaction.payload_plan`). :class:`Typing` makes
a pass's typed columns (:mod:`sparkjobs.compaction.typed`) where the rows are written,
and observes the whole window's payload shape and the values rescued per place.

A sample misses fields that few records have. When the pass saw any
(:func:`sparkjobs.compaction.payload_plan.next_schema`), :func:`retype` writes the
run's kept rows again from its own Parquet with the grown schema: the deduplicated
rows, columnar, each file into one file again (same hour, same order), never the
landed objects a second time. The dropped copies have no typed columns to redo.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as sf

from sparkjobs.catalog import TableRef
from sparkjobs.compaction import eventtime, required, typedjvm
from sparkjobs.compaction.distribute import task_keys
from sparkjobs.compaction.job import CompactionError, CompactJob
from sparkjobs.compaction.payload_plan import (
    PayloadPlan,
    first_schema,
    next_schema,
    sample_keys,
    untyped,
)
from sparkjobs.compaction.sample import sample_shape
from sparkjobs.compaction.typed import pointer_of, typed_frame
from sparkjobs.io import Filesystem, Listed, join
from sparkjobs.table import table
from sparkjobs.table.columns import PAYLOAD, RESCUED
from sparkjobs.table.evolve import Evolution
from sparkjobs.table.manifest import RunManifest
from sparkjobs.table.payload import ListOf, Struct, Type, required_paths
from sparkjobs.table.schema import COMPACTED, written

log = structlog.get_logger("sparkjobs.compact")


class Typing:
    """A pass's typed columns by :class:`~sparkjobs.compaction.payload_plan.PayloadPlan`,
    and what the pass observed: the window's payload shape, the values rescued per
    place."""

    def __init__(self, plan: PayloadPlan) -> None:
        self.plan = plan
        self.observation = Observation("payload")
        self.places: list[tuple[str, ...]] = []
        self.required: list[tuple[str, ...]] = []
        """The required places, in the order of the observation's ``m`` counts."""
        self.engine = ""
        """What typed the rows: ``jvm`` (:mod:`sparkjobs.compaction.typedjvm`) or
        ``spark`` (:mod:`sparkjobs.compaction.typed`); empty when nothing was typed."""

    def columns(self, rows: DataFrame) -> tuple[DataFrame, list[Column]]:
        """``rows`` observed, with the typed columns; the columns to write."""
        if not self.plan.writes_columns:  # no column yet: only the window's shape
            variant = sf.try_parse_json(sf.when(sf.col("kept"), sf.col("data")))
            is_object = sf.try_variant_get(variant, "$", "struct<>").isNotNull()
            rows = rows.observe(
                self.observation,
                sf.schema_of_variant_agg(sf.when(is_object, variant)).alias("shape"),
                sf.lit(0).alias("rows"),
            )
            return rows, []
        data = sf.when(sf.col("kept"), sf.col("data"))
        own = rows.columns
        schema, timestamps = self.plan.schema, self.plan.timestamps
        made = typedjvm.typed_frame(rows, data, schema, timestamps)
        rows, typed = made or typed_frame(rows, data, schema, timestamps)
        self.engine = "jvm" if made else "spark"
        self.places = list(typed.flags)
        payload, missing = required.enforce(typed.payload, schema)
        self.required = list(missing)
        # Only what is written and counted goes on: the observation is a step of its own,
        # and every column still there would be copied into each row it sees.
        if typed.places is not None:  # one aggregate adds up each place's count
            counted = [typed.places.alias("_places")]
            counts = [sf.call_function(typedjvm.COUNTS, sf.col("_places")).alias("places")]
        else:
            flags = list(typed.flags.values())
            counted = [flag.alias(f"_rescued{i}") for i, flag in enumerate(flags)]
            counts = [sf.count_if(f"_rescued{i}").alias(f"r{i}") for i in range(len(flags))]
        rows = rows.select(
            *own,
            payload.alias(PAYLOAD),
            typed.rescued.alias(RESCUED),
            typed.shape.alias("_shape"),
            *counted,
            *(flag.alias(f"_missing{i}") for i, flag in enumerate(missing.values())),
        )
        rows = rows.observe(
            self.observation,
            sf.schema_of_variant_agg("_shape").alias("shape"),
            sf.count_if(sf.col(RESCUED).isNotNull()).alias("rows"),
            *counts,
            *(sf.count_if(f"_missing{i}").alias(f"m{i}") for i in range(len(missing))),
        )
        return rows, [sf.col(PAYLOAD), sf.col(RESCUED)]

    def plain(self) -> list[str]:
        """The Parquet paths of the typed leaves this pass writes (none before the payload
        has a column)."""
        return parquet_leaves(self.plan.schema) if self.plan.writes_columns else []

    def missing(self) -> dict[tuple[str, ...], int]:
        """How many records had no value at each required place."""
        got = self.observation.get
        return {path: int(got.get(f"m{i}") or 0) for i, path in enumerate(self.required)}

    def observed(self) -> tuple[str | None, dict[tuple[str, ...], int], int]:
        """The window's shape (None when no payload was an object), the rescued values
        per place, and the rows with any."""
        got = self.observation.get
        if "places" in got:
            each = typedjvm.counts_of(got["places"], len(self.places))
        else:
            each = [int(got.get(f"r{i}") or 0) for i in range(len(self.places))]
        counts = dict(zip(self.places, each, strict=True))
        shape = got["shape"]
        return (
            (shape if shape and shape.startswith("OBJECT<") else None),
            counts,
            int(got["rows"] or 0),
        )


UNIQUE_COLUMNS = ("sequence_number", "event_id", "arrival_ts", "data")
"""Columns (nearly) unique per row: a dictionary is built for each page and thrown away.
Without one a day compacts with ~25% less CPU into files ~2% larger."""


def plain_columns(job: CompactJob, typing: Typing | None) -> list[str]:
    """The columns a run writes without a dictionary: the near-unique ones, the event
    time, and every typed payload leaf. Dictionaries off for the leaves cut about a
    tenth of a typed run's CPU on the production-like day for files 0.5 % larger
    (docs/benchmarks.md): ids and times are near-unique, and zstd still packs the few
    repeated values of the rest."""
    leaves = typing.plain() if typing is not None else []
    return [*UNIQUE_COLUMNS, *eventtime.written(job), *leaves]


def parquet_leaves(schema: Struct, path: str = PAYLOAD) -> list[str]:
    """Each leaf of the ``payload`` column as Parquet names it (Spark writes a list as
    ``list.element``)."""
    found: list[str] = []
    for f in schema.fields:
        found.extend(_leaf_paths(f.type, f"{path}.{f.name}"))
    return found


def _leaf_paths(kind: Type, path: str) -> list[str]:
    if isinstance(kind, Struct):
        return parquet_leaves(kind, path)
    if isinstance(kind, ListOf):
        return _leaf_paths(kind.element, f"{path}.list.element")
    return [path]


def first_payload(
    spark: SparkSession, job: CompactJob, ref: TableRef, sizes: Mapping[str, int]
) -> PayloadPlan:
    """The payload schema a run starts with: the table's, the declared, a sample's of
    the objects the run reads (``sizes``: their sizes by key)."""
    found = table.open_table(ref, create=False)
    declared = job.declared.type if job.declared is not None else None
    keys = [join(job.source, rel) for rel in sample_keys(sizes)]
    sample = sample_shape(spark, keys, job.payload_format, declared)
    current = table.payload_schema(found) if found is not None else None
    return first_schema(current, job.declared, sample.shape, sample.kinds, sample.absent)


def record(typing: Typing, manifest: RunManifest, passes: int) -> Evolution | None:
    """What a pass observed of the payload, in the manifest; the grown schema to write
    the window again with when it had fields the pass had no column for, or records
    without a required column's value (only after the first pass: the rewrite's schema
    holds every field the window has, and relaxes every such column)."""
    shape, rescued, rows = typing.observed()
    missing = {path: n for path, n in typing.missing().items() if n}
    if passes > 1 and missing:  # the rewrite relaxed them all: its placeholders stay out
        places = ", ".join(pointer_of(path) for path in sorted(missing))
        raise CompactionError(f"the rewrite still had records without required {places}")
    # A rewrite relaxes nothing more: the first pass's counts stand.
    relaxed = (
        manifest.payload.get("relaxed", {})
        if passes > 1
        else {pointer_of(path): n for path, n in sorted(missing.items())}
    )
    manifest.payload = {
        "passes": passes,
        "engine": typing.engine,
        "columns": [pointer_of(path) for path in _leaves(typing.plan.schema)],
        "required": [pointer_of(path) for path in sorted(required_paths(typing.plan.schema))],
        "relaxed": relaxed,
        "rescued_rows": rows,
        "rescued": {pointer_of(path): n for path, n in sorted(rescued.items()) if n},
        "untyped": [pointer_of(path) for path in untyped(typing.plan, shape)],
    }
    return next_schema(typing.plan, shape, rescued, missing) if passes == 1 else None


def _leaves(schema: Struct, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every column of the payload (a struct's fields, not the struct), by path."""
    out: list[tuple[str, ...]] = []
    for f in schema.fields:
        at = (*path, f.name)
        out.extend(_leaves(f.type, at) if isinstance(f.type, Struct) else [at])
    return out


RETYPED = ".retyped"
"""Suffix of the folder beside a run's where :func:`retype` writes, before the files
replace the run's own."""


def retype(
    spark: SparkSession, fs: Filesystem, run_dir: str, payload: PayloadPlan, job: CompactJob
) -> Typing:
    """Write the run's kept rows again with ``payload``'s columns; the pass's typing.

    Each kept file of ``run_dir`` (not the ``dt=dropped-…`` copies) is read and written
    as one file of the same hour, rows in the same order, into a folder beside it; the
    new files then replace the old ones in ``run_dir``.
    """
    kept = sorted(
        (item for item in fs.list_files(run_dir) if _kept_file(item)), key=lambda f: f.uri
    )
    typing = Typing(payload)
    if not kept:
        return typing
    uris = [item.uri for item in kept]
    keys = task_keys(len(uris))
    # Each file by its folders and name (Spark and the filesystem spell the scheme apart).
    folders, event = eventtime.folders(job), eventtime.written(job)
    depth = len(folders) + 1
    by_day = [eventtime.event_day(sf.col(table.EVENT_TS)).alias(eventtime.EVENT_DAY)]
    tails = [uri.rsplit("/", depth)[-depth:] for uri in uris]
    by_file = sf.create_map(
        *[sf.lit(x) for i, tail in enumerate(tails) for x in ("/".join(tail), keys[i])]
    )
    path = sf.col("_metadata.file_path")
    rows = spark.read.parquet(*uris).select(
        *(f.name for f in COMPACTED.fields),
        *event,
        sf.regexp_extract(path, r"/dt=([^/]+)/", 1).alias("dt"),
        sf.regexp_extract(path, r"/hour=([^/]+)/", 1).alias("hour"),
        *(by_day if eventtime.EVENT_DAY in folders else []),
        by_file[sf.substring_index(path, "/", -depth)].alias("task_key"),
        sf.lit(True).alias("kept"),
    )
    rows = rows.repartition(len(uris), "task_key").sortWithinPartitions(
        "shard_id",
        sf.length("sequence_number"),
        "sequence_number",
        "subsequence_number",
    )
    rows, typed = typing.columns(rows)
    target = run_dir.rstrip("/") + RETYPED
    writer = (
        rows.select(*(written(f).alias(f.name) for f in COMPACTED.fields), *event, *typed, *folders)
        .write.mode("errorifexists")
        .option("compression", job.compression)
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    for column in plain_columns(job, typing):
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    try:
        writer.partitionBy(*folders).parquet(target)
        fs.remove_leftovers(target)
        for item in kept:
            fs.delete(item.uri)
        for item in fs.list_files(target):
            if item.uri.endswith(".parquet"):
                fs.move(item.uri, join(run_dir, item.uri[len(target) :].lstrip("/")))
    finally:
        fs.delete(target)
    return typing


def _kept_file(item: Listed) -> bool:
    return item.uri.endswith(".parquet") and "/dt=dropped-" not in item.uri
