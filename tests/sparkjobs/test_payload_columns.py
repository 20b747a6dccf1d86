"""The payload's types as Iceberg's and Spark's (sparkjobs.table.payload_columns): what a
window showed becomes columns and reads back the same; Spark parses the same JSON
into the same shape (no JVM: only the types are compared here)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from pyiceberg import types as ice
from pyiceberg.schema import Schema
from pyspark.sql import types as spark

from sparkjobs.compaction.typedwrite import parquet_leaves
from sparkjobs.table.evolve import evolve
from sparkjobs.table.payload import (
    LONG,
    NULL,
    STRING,
    TIMESTAMP,
    VARIANT,
    Decimal,
    Field,
    ListOf,
    Struct,
)
from sparkjobs.table.payload_columns import from_iceberg, to_iceberg, to_spark
from tests.sparkjobs.test_schema_evolution import RECORDS, _schema


@given(RECORDS)
def test_what_a_window_showed_becomes_columns_that_read_back_the_same(
    records: list[dict[str, Any]],
) -> None:
    schema = evolve(Struct(()), _schema(records), new_table=True).schema
    iceberg = to_iceberg(schema)
    assert isinstance(iceberg, ice.StructType)
    Schema(*iceberg.fields)  # field ids unique: pyiceberg accepts it as a schema
    assert from_iceberg(iceberg) == schema
    parsed = to_spark(schema)
    assert isinstance(parsed, spark.StructType)
    assert [f.name for f in parsed.fields] == [f.name for f in schema.fields]


def test_each_type_maps_to_its_column_type() -> None:
    payload = Struct(
        (
            Field("amount", Decimal(12, 2)),
            Field("at", TIMESTAMP, False),
            Field("ids", ListOf(LONG, False)),
        )
    )
    iceberg = to_iceberg(payload, first_id=100)
    assert iceberg == ice.StructType(
        ice.NestedField(100, "amount", ice.DecimalType(12, 2), True),
        ice.NestedField(101, "at", ice.TimestamptzType(), False),
        ice.NestedField(102, "ids", ice.ListType(103, ice.LongType(), False), True),
    )
    assert to_spark(payload) == spark.StructType(
        [
            spark.StructField("amount", spark.DecimalType(12, 2)),
            spark.StructField("at", spark.TimestampType()),
            spark.StructField("ids", spark.ArrayType(spark.LongType())),
        ]
    )


@pytest.mark.parametrize("untyped", [NULL, VARIANT])
def test_a_type_without_a_column_is_refused(untyped: Any) -> None:
    with pytest.raises(ValueError, match="no column type"):
        to_iceberg(Struct((Field("x", untyped),)))
    with pytest.raises(ValueError, match="no column type"):
        to_spark(untyped)


def test_each_typed_leaf_is_named_as_parquet_names_it() -> None:
    def struct(*fields: tuple[str, Any]) -> Struct:
        return Struct(tuple(Field(name, kind) for name, kind in sorted(fields)))

    schema = struct(
        ("id", LONG),
        ("user", struct(("name", STRING), ("tags", ListOf(STRING)))),
        ("items", ListOf(struct(("sku", STRING), ("qty", LONG)))),
        ("grid", ListOf(ListOf(LONG))),
    )
    assert parquet_leaves(schema) == [
        "payload.grid.list.element.list.element",
        "payload.id",
        "payload.items.list.element.qty",
        "payload.items.list.element.sku",
        "payload.user.name",
        "payload.user.tags.list.element",
    ]
