"""The columns of a landed line and of a compacted row.

Both derive from the archive's field list (:data:`consumer.archive.envelope.FIELDS`).
The header fields of :data:`LANDED` are what :mod:`sparkjobs.lines` parses (an
explicit schema, no inference pass over the archive); ``data`` is never parsed but
sliced from the line as written, and is a string in the compacted row.
"""

from __future__ import annotations

from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from consumer.archive.envelope import FIELDS

CORRUPT = "_corrupt_record"

_SPARK_TYPES = {"string": StringType(), "integer": LongType(), "json": StringType()}

LANDED = StructType(
    [StructField(field.name, _SPARK_TYPES[field.kind]) for field in FIELDS]
    + [StructField(CORRUPT, StringType())]
)
"""A landed JSON line, plus the text of a line that does not parse."""

COMPACTED = StructType(
    [
        StructField("stream", StringType(), nullable=False),
        StructField("shard_id", StringType(), nullable=False),
        StructField("sequence_number", StringType(), nullable=False),
        StructField("subsequence_number", LongType(), nullable=False),
        StructField("partition_key", StringType()),
        StructField("arrival_ts", TimestampType(), nullable=False),
        StructField("landed_ts", TimestampType()),
        StructField("event_id", StringType()),
        StructField("data", StringType()),
    ]
)
"""A compacted row (``dt`` and ``hour`` are the partition folders, not columns)."""
