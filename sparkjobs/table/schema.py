"""The columns of a landed line and of a compacted row.

Both derive from the archive's field list (:data:`consumer.archive.envelope.FIELDS`).
The header fields of :data:`LANDED` are what :mod:`sparkjobs.compaction.lines` parses (an
explicit schema, no inference pass over the archive); ``data`` is never parsed but
sliced from the line as written, and is a string in the compacted row.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from consumer.archive.envelope import FIELDS
from sparkjobs.table.columns import COMPACTED_COLUMNS

CORRUPT = "_corrupt_record"

_SPARK_TYPES = {"string": StringType(), "integer": LongType(), "json": StringType()}
_COMPACTED_TYPES = {"string": StringType(), "long": LongType(), "timestamp": TimestampType()}

LANDED = StructType(
    [StructField(field.name, _SPARK_TYPES[field.kind]) for field in FIELDS]
    + [StructField(CORRUPT, StringType())]
)
"""A landed JSON line, plus the text of a line that does not parse."""

COMPACTED = StructType(
    [
        StructField(name, _COMPACTED_TYPES[kind], nullable=nullable)
        for name, kind, nullable in COMPACTED_COLUMNS
    ]
)
"""A compacted row, as Spark writes and reads it (the table's columns)."""

FIELD_ID = "parquet.field.id"
"""Column metadata that makes Spark write the Iceberg field id into the Parquet schema,
so the files are the table's own, not matched by name."""


def field_ids() -> dict[str, dict[str, int]]:
    """Each compacted column's metadata carrying its Iceberg field id (1.. in order)."""
    return {name: {FIELD_ID: i} for i, (name, _, _) in enumerate(COMPACTED_COLUMNS, start=1)}


def written(field: StructField) -> Column:
    """The column ``field`` as a run writes it: a column the table requires (not
    ``nullable``) is written as a required Parquet field, which pyiceberg demands of a
    file it files under a required column. Every row written has it set (lines without
    it are malformed), so the zero it falls back to is never written; it only tells
    Spark the column cannot be null."""
    column = sf.col(field.name)
    if field.nullable:
        return column
    zero = {
        "string": sf.lit(""),
        "bigint": sf.lit(0).cast("bigint"),
        "timestamp": sf.timestamp_seconds(sf.lit(0)),
    }[field.dataType.simpleString()]
    return sf.coalesce(column, zero)
