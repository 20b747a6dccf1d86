"""Required payload columns as a pass writes them (issue 48).

A Parquet file may be filed under a required column only when its field is required
too (pyiceberg refuses an optional one), so a pass writes the required fields of its
schema (:func:`sparkjobs.table.payload.required_paths`) as non-nullable:
each value, or a placeholder of its type where a record has none, and a flag.

A record has none when, with the field's parent set, the field is missing, null, or
its value did not fit and was rescued. Any flag makes the run relax that column
(:func:`sparkjobs.compaction.payload_plan.next_schema`) and write its rows again from
``data`` (:func:`sparkjobs.compaction.typedwrite.retype`): placeholders never reach
the table. The same rule serves both ways of typing (the JVM function and Spark's
expressions), since it reads only their typed struct.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal as Exact

from pyspark.sql import Column
from pyspark.sql import functions as sf

from sparkjobs.table.evolve import Path
from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Decimal,
    ListOf,
    Primitive,
    Struct,
    Type,
)
from sparkjobs.table.payload_columns import to_spark


def placeholder(kind: Type) -> Column:
    """A non-null value of ``kind`` (whose nullability Spark knows to be false)."""
    if isinstance(kind, Primitive):
        return {
            BOOLEAN: lambda: sf.lit(False),
            INT: lambda: sf.lit(0),
            LONG: lambda: sf.lit(0).cast("bigint"),
            FLOAT: lambda: sf.lit(0.0).cast("float"),
            DOUBLE: lambda: sf.lit(0.0),
            STRING: lambda: sf.lit(""),
            TIMESTAMP: lambda: sf.lit(datetime(1970, 1, 1, tzinfo=UTC)),
        }[kind]()
    if isinstance(kind, Decimal):  # a literal of scale s: the coalesce widens it exactly
        return sf.lit(Exact(0).scaleb(-kind.scale)).cast(to_spark(kind))
    if isinstance(kind, ListOf):
        return sf.array().cast(to_spark(kind))
    raise ValueError(f"no placeholder for {kind}")


def _holds_required(kind: Struct) -> bool:
    return any(
        f.required or (isinstance(f.type, Struct) and _holds_required(f.type)) for f in kind.fields
    )


def enforce(payload: Column, schema: Struct) -> tuple[Column, dict[Path, Column]]:
    """``payload`` (the typed struct, every field nullable) with ``schema``'s required
    fields non-nullable, and per required place whether this row has no value there."""
    if not _holds_required(schema):
        return payload, {}
    flags: dict[Path, Column] = {}

    def build(value: Column, kind: Struct, path: Path, present: Column) -> Column:
        parts = []
        for f in kind.fields:
            at = (*path, f.name)
            child = value.getField(f.name)
            if f.required:
                flags[at] = present & child.isNull()
            if isinstance(f.type, Struct) and (f.required or _holds_required(f.type)):
                inner = build(child, f.type, at, present & child.isNotNull())
                part = inner if f.required else sf.when(child.isNotNull(), inner)
            elif f.required:
                part = sf.coalesce(child, placeholder(f.type))
            else:
                part = child
            parts.append(part.alias(f.name))
        return sf.struct(*parts)

    present = payload.isNotNull()
    return sf.when(present, build(payload, schema, (), present)), flags
