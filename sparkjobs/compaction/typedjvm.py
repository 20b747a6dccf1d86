"""The payload's typed columns in one JVM function (issue 48), where the session has it.

:mod:`sparkjobs.compaction.typed` builds the typed columns from Spark expressions: the
payload parsed once into a variant, then per field a lookup, a kind and a check, ~12
projections' worth of work a field, and lists of objects through a function per element
that Spark interprets. On the production-like day that cost 3.5x the untyped
compaction's CPU. ``sparkjobs/compaction/jvm/TypedPayload.java``, in the object reader's
jar (:mod:`sparkjobs.compaction.objectreader`), does the same in one pass per row: the
JSON read once by Jackson into a small tree, each field taken by the same rules, the
rescued values kept as their own text.

Besides the columns it returns the row's *residual*: the payload's fields that have no
column and the rescued values, at their places. The window's shape for the schema's
next step is read from it (``schema_of_variant_agg``) instead of from every whole
payload: a field the schema holds and whose values fit tells the next schema nothing.

The function takes the schema as a plan (:func:`plan_of`, JSON, passed as bytes), and
Spark is told the struct it returns (:func:`returns`) when the function is registered
under a name of that schema's (:func:`typed_frame`). Without the jar the Spark
expressions are used; tests/sparkjobs/test_typed_jvm.py checks that both give the same
rows.
"""

from __future__ import annotations

import hashlib
import json

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql import types as spark

from sparkjobs.compaction.counters import register_aggregate
from sparkjobs.compaction.typed import Timestamps, Typed, places_of, pointer_of
from sparkjobs.table.evolve import ELEMENT, Path
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

CLASS = "kinesislander.spark.TypedPayload"
COUNTS_CLASS = f"{CLASS}$PlaceCounts"
COUNTS = "lander_place_counts"
"""places (text, ``3,7``; null: none) -> how many rows rescued at each place, as text."""
_COLUMN = "_typed_j"
_KINDS: dict[Primitive, str] = {
    BOOLEAN: "boolean",
    STRING: "string",
    INT: "int",
    LONG: "long",
    FLOAT: "float",
    DOUBLE: "double",
}


def plan_of(schema: Struct, timestamps: Timestamps, zone: str) -> str:
    """The function's plan of ``schema``: each field's type, its place's index (as
    :func:`sparkjobs.compaction.typed.places_of` numbers them) and its pointer as a
    JSON key; timestamps' notations; ISO-8601 text read in ``zone`` (the session's)."""
    places = {path: i for i, (path, _) in enumerate(places_of(schema))}

    def kind(t: Type, path: Path) -> dict[str, object]:
        if isinstance(t, Struct):
            return {
                "kind": "struct",
                "fields": [
                    {
                        "name": f.name,
                        "type": kind(f.type, (*path, f.name)),
                        "place": places.get((*path, f.name), -1),
                        "key": json.dumps(pointer_of((*path, f.name))),
                    }
                    for f in t.fields
                ],
            }
        if isinstance(t, ListOf):
            return {"kind": "list", "element": kind(t.element, (*path, ELEMENT))}
        if isinstance(t, Decimal):
            return {"kind": "decimal", "precision": t.precision, "scale": t.scale}
        if t == TIMESTAMP:
            notation = timestamps.get(path, "iso")
            return {"kind": "timestamp", "per_second": 0 if notation == "iso" else int(notation)}
        if isinstance(t, Primitive) and t in _KINDS:
            return {"kind": _KINDS[t]}
        raise ValueError(f"no column for {t} at {pointer_of(path)}")

    return json.dumps({"zone": zone, "type": kind(schema, ())}, separators=(",", ":"))


def returns(schema: Struct) -> spark.StructType:
    """What the function returns for ``schema``."""
    return spark.StructType(
        [
            spark.StructField("payload", to_spark(schema)),
            spark.StructField("rescued", spark.StringType()),
            spark.StructField("residual", spark.StringType()),
            spark.StructField("places", spark.StringType()),
        ]
    )


def typed_frame(
    rows: DataFrame, data: Column, schema: Struct, timestamps: Timestamps | None = None
) -> tuple[DataFrame, Typed] | None:
    """``rows`` with the function's result, and the typed columns read from it, as
    :func:`sparkjobs.compaction.typed.typed_frame` makes them (``shape``: the residual);
    None when the session cannot load the function."""
    if not schema.fields:
        raise ValueError("no column for an empty payload schema")
    session = rows.sparkSession
    zone = session.conf.get("spark.sql.session.timeZone") or "UTC"
    plan = plan_of(schema, timestamps or {}, zone)
    name = "lander_typed_" + hashlib.sha256(plan.encode()).hexdigest()[:16]
    try:
        session.udf.registerJavaFunction(name, CLASS, returns(schema))
    except AnalysisException:
        return None
    # A projection of its own: what reads the result's fields must not call it again.
    # The plan as bytes: the function then knows it by identity, row after row (a string
    # would be decoded and compared on each).
    call = sf.call_function(name, data, sf.lit(bytearray(plan.encode())))
    rows = rows.select("*", call.alias(_COLUMN))
    result = sf.col(_COLUMN)
    places = sf.split(result.getField("places"), ",")
    return rows, Typed(
        payload=result.getField("payload"),
        rescued=result.getField("rescued"),
        shape=sf.try_parse_json(result.getField("residual")),
        flags={
            path: sf.coalesce(sf.array_contains(places, sf.lit(str(i))), sf.lit(False))
            for i, (path, _) in enumerate(places_of(schema))
        },
        places=(
            result.getField("places") if register_aggregate(session, COUNTS_CLASS, COUNTS) else None
        ),
    )


def counts_of(text: str | None, places: int) -> list[int]:
    """:data:`COUNTS`' text as a count per place (the places after the highest seen: 0)."""
    found = [int(n) for n in text.split(",")] if text else []
    return (found + [0] * places)[:places]
