"""The dedupe key of a compaction line, as Spark columns.

A sound line is keyed by its event id; without one, when a sequence pointer is set and
the payload holds a number there, by its producer's partition key and that number;
else by its position (shard, sequence and subsequence number). A malformed line is
keyed by its file (:data:`BAD_LINE`). :func:`index_rows` keys the published rows and
dropped copies of the horizon hours the same way, so the window step of
:mod:`sparkjobs.compaction.sparkplan` compares them with the run's own lines.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import json_path
from sparkjobs.table.schema import COMPACTED

BY_EVENT, BY_POSITION, BAD_LINE, BY_SEQUENCE = 0, 1, 2, 3
"""What a line's dedupe key is: its event id, its position, (malformed) its file, or its
producer's partition key and sequence number."""


def dedupe_key(sequence_pointer: str | None) -> tuple[Column, Column]:
    """A sound line's dedupe kind and key: its event id; else, with a sequence pointer,
    its partition key and the payload's number there (NUL between: neither holds one
    as JSON text); else its position."""
    position = sf.concat_ws(
        "/", sf.col("shard_id"), sf.col("sequence_number"), sf.col("subsequence_number")
    )
    has_event = sf.col("event_id").isNotNull()
    if sequence_pointer is None:
        kind = sf.when(has_event, sf.lit(BY_EVENT)).otherwise(sf.lit(BY_POSITION))
        return kind, sf.coalesce(sf.col("event_id"), position)
    number = sf.get_json_object(sf.col("data"), json_path(sequence_pointer))
    by_number = ~has_event & number.isNotNull()
    kind = (
        sf.when(has_event, sf.lit(BY_EVENT))
        .when(by_number, sf.lit(BY_SEQUENCE))
        .otherwise(sf.lit(BY_POSITION))
    )
    producer = sf.concat(sf.coalesce(sf.col("partition_key"), sf.lit("")), sf.lit("\0"), number)
    key = sf.when(has_event, sf.col("event_id")).when(by_number, producer)
    return kind, sf.coalesce(key, position)


def index_rows(
    spark: SparkSession, files: list[str], sequence_pointer: str | None = None
) -> DataFrame:
    """Lines of the horizon hours read through their index, shaped as the prepared
    lines of :mod:`sparkjobs.compaction.sparkplan`: no hour (slot -1), no file to break a tie
    (null sorts first), no payload.

    Published rows and dropped copies together are every line of the hour's objects
    (malformed ones aside, which dedupe never compares), so the window step sees the
    same copies before each of the run's own lines as when it reads the objects.
    """
    rows = spark.read.schema(COMPACTED).parquet(*files)
    kind, key = dedupe_key(sequence_pointer)
    return rows.select(
        kind.alias("kind"),
        key.alias("key"),
        sf.lit(-1).alias("slot"),
        "shard_id",
        "sequence_number",
        "subsequence_number",
        sf.lit(None).cast("string").alias("partition_key"),
        sf.col("arrival_ts").alias("arrival"),
        sf.lit(None).cast("timestamp").alias("landed_ts"),
        "event_id",
        sf.lit(None).cast("string").alias("data"),
        sf.length("sequence_number").alias("seq_len"),
        sf.lit(None).cast("long").alias("file"),
    )
