"""The payload's types (:mod:`sparkjobs.table.payload`) as Iceberg's and Spark's.

Iceberg's, to evolve the table (pyiceberg's ``update_schema().union_by_name`` with a
schema built here: it matches columns by name, adds the new ones with fresh field ids
and promotes the widened ones) and to read a table's payload columns back
(:func:`from_iceberg`); Spark's, to parse ``data`` into the typed columns
(``from_json`` with :func:`to_spark`). Field ids here are placeholders, numbered in
order from ``first_id``: the table's own ids are kept by the union. A type no column
has (null, variant: :mod:`sparkjobs.table.evolve` leaves those out) is a ValueError.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from pyiceberg import types as ice
from pyspark.sql import types as spark

from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Decimal,
    Field,
    ListOf,
    Primitive,
    Struct,
    Type,
)

_ICEBERG: dict[Primitive, ice.IcebergType] = {
    BOOLEAN: ice.BooleanType(),
    INT: ice.IntegerType(),
    LONG: ice.LongType(),
    FLOAT: ice.FloatType(),
    DOUBLE: ice.DoubleType(),
    STRING: ice.StringType(),
    TIMESTAMP: ice.TimestamptzType(),
}
_SPARK: dict[Primitive, spark.DataType] = {
    BOOLEAN: spark.BooleanType(),
    INT: spark.IntegerType(),
    LONG: spark.LongType(),
    FLOAT: spark.FloatType(),
    DOUBLE: spark.DoubleType(),
    STRING: spark.StringType(),
    TIMESTAMP: spark.TimestampType(),
}


def to_iceberg(payload: Type, first_id: int = 1) -> ice.IcebergType:
    """``payload`` as an Iceberg type, its fields numbered from ``first_id``."""
    return _iceberg(payload, itertools.count(first_id))


def _iceberg(payload: Type, ids: Iterator[int]) -> ice.IcebergType:
    if isinstance(payload, Primitive) and payload in _ICEBERG:
        return _ICEBERG[payload]
    if isinstance(payload, Decimal):
        return ice.DecimalType(payload.precision, payload.scale)
    if isinstance(payload, ListOf):
        element_id = next(ids)
        return ice.ListType(element_id, _iceberg(payload.element, ids), payload.element_required)
    if isinstance(payload, Struct):
        fields = []
        for f in payload.fields:
            field_id = next(ids)
            fields.append(ice.NestedField(field_id, f.name, _iceberg(f.type, ids), f.required))
        return ice.StructType(*fields)
    raise ValueError(f"no column type for {payload}")


def from_iceberg(column: ice.IcebergType) -> Type:
    """An Iceberg column's type as a payload type (the table's payload columns read
    back before a run evolves them)."""
    for primitive, iceberg in _ICEBERG.items():
        if column == iceberg:
            return primitive
    if isinstance(column, ice.DecimalType):
        return Decimal(column.precision, column.scale)
    if isinstance(column, ice.ListType):
        return ListOf(from_iceberg(column.element_type), column.element_required)
    if isinstance(column, ice.StructType):
        return Struct(
            tuple(
                sorted(
                    (Field(f.name, from_iceberg(f.field_type), f.required) for f in column.fields),
                    key=lambda f: f.name,
                )
            )
        )
    raise ValueError(f"no payload type for the column type {column}")


def to_spark(payload: Type) -> spark.DataType:
    """``payload`` as the Spark type ``from_json`` parses it into (every field nullable:
    a record may leave out what the table requires, and is then rescued, not lost)."""
    if isinstance(payload, Primitive) and payload in _SPARK:
        return _SPARK[payload]
    if isinstance(payload, Decimal):
        return spark.DecimalType(payload.precision, payload.scale)
    if isinstance(payload, ListOf):
        return spark.ArrayType(to_spark(payload.element), containsNull=True)
    if isinstance(payload, Struct):
        return spark.StructType(
            [spark.StructField(f.name, to_spark(f.type), nullable=True) for f in payload.fields]
        )
    raise ValueError(f"no column type for {payload}")
