"""The payload's typed columns in Spark (issue 48): ``data`` parsed once, each field
taken only when its value fits its column without loss, the rest rescued.

Each kept record's ``data`` is parsed once by Spark's strict JSON parser into a variant
(``try_parse_json``); each column's value is taken from it by path. Spark's casts from a
variant are lenient (``"12"`` becomes 12, ``1.5`` an integer 1 or a decimal rounded),
so a value is taken only when its kind (``schema_of_variant``) is the column's, as
:func:`sparkjobs.table.payload.fits` decides in Python:

- ``boolean``, ``string``: a JSON boolean, a JSON string;
- ``int``, ``long``: a JSON integer in range;
- ``decimal(p, s)``: an integer or a number with at most ``s`` digits after the point
  (trailing zeros aside) and at most ``p - s`` before it, or such a number in a string;
- ``double``, ``float``: a finite number; an integer only up to 2^53 (2^24), a
  ``float`` only when it holds the number exactly;
- ``timestamp``: as declared, an ISO-8601 string, or an epoch number in the declared
  units;
- a struct: an object (its fields each on their own); a list: an array all of whose
  elements fit (else the whole list is rescued).

A present value that does not fit leaves its column null and goes, as JSON, to the
``rescued`` column, an object by JSON Pointer (``{"/seq": "oops"}``); :class:`Typed`
also flags each place, for the run's counts. Fields the table has no column for stay
in ``data`` only; the run learns of them from the window's shape
(``schema_of_variant_agg`` over :attr:`Typed.shape`) and evolves the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import parse
from sparkjobs.compaction.payload_plan import addressable
from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    EXACT_DOUBLE_INT,
    EXACT_FLOAT_INT,
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

log = structlog.get_logger("sparkjobs.compact")

Path = tuple[str, ...]
Timestamps = Mapping[Path, str | int]
"""How each declared timestamp is written (``iso`` or units per second), by path
(``element`` for a list's items), as :class:`sparkjobs.table.declared.Declared` says."""
ELEMENT = "element"


@dataclass
class Typed:
    """The typed columns of one row, and where its values were rescued."""

    payload: Column
    """The payload's fields, as the table's ``payload`` struct (null for a payload that
    is not a JSON object)."""
    rescued: Column
    """JSON object of the rescued values by pointer, or null."""
    shape: Column
    """The parsed payload when it is an object (for ``schema_of_variant_agg``)."""
    flags: dict[Path, Column] = field(default_factory=dict)
    """Per place: whether this row's value there was rescued."""


def typed_payload(data: Column, schema: Struct, timestamps: Timestamps | None = None) -> Typed:
    """The typed columns of ``data`` (a payload's JSON text; null for none) by ``schema``."""
    variant = sf.try_parse_json(data)
    is_object = _is_object(variant)
    builder = _Builder(timestamps or {})
    value = builder.struct(variant, schema, ())
    parts = [
        sf.when(bad, sf.concat(sf.lit(json.dumps(pointer_of(path)) + ":"), sf.to_json(sub)))
        for path, bad, sub in builder.rescued
    ]
    joined = sf.concat(sf.lit("{"), sf.concat_ws(",", *parts), sf.lit("}")) if parts else None
    rescued = sf.nullif(joined, sf.lit("{}")) if joined is not None else sf.lit(None)
    return Typed(
        payload=sf.when(is_object, value).cast(to_spark(schema)),
        rescued=rescued.cast("string"),
        shape=sf.when(is_object, variant),
        flags={path: bad for path, bad, _ in builder.rescued},
    )


def pointer_of(path: Path) -> str:
    """The JSON Pointer of ``path`` (RFC 6901: ``~`` as ``~0``, ``/`` as ``~1``)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)


def _segment(name: str) -> str:
    quote = "'" if '"' in name else '"'
    return f"$[{quote}{name}{quote}]"


def _get(variant: Column, name: str) -> Column:
    return sf.variant_get(variant, _segment(name), "variant")


def _present(sub: Column) -> Column:
    return sub.isNotNull() & ~sf.is_variant_null(sub)


def _is_object(sub: Column) -> Column:
    return sf.try_variant_get(sub, "$", "struct<>").isNotNull()


class _Builder:
    """Builds the columns of a struct; collects the places values may be rescued."""

    def __init__(self, timestamps: Timestamps) -> None:
        self.timestamps = timestamps
        self.rescued: list[tuple[Path, Column, Column]] = []

    def struct(self, variant: Column, schema: Struct, path: Path) -> Column:
        """The struct's value, its fields taken one by one (each rescued on its own)."""
        if not schema.fields:  # Parquet has no empty group: such a struct is no column
            raise ValueError(f"no column for the empty struct at {pointer_of(path) or '/'}")
        fields = []
        for column in schema.fields:
            at = (*path, column.name)
            sub = _get(variant, column.name) if addressable(column.name) else sf.lit(None)
            if isinstance(column.type, Struct):
                inner = self.struct(sub, column.type, at)
                obj = _is_object(sub)
                self.rescued.append((at, _present(sub) & ~obj, sub))
                fields.append(sf.when(obj, inner).alias(column.name))
                continue
            value, fits = self.leaf(sub, column.type, at)
            self.rescued.append((at, _present(sub) & ~fits, sub))
            fields.append(sf.when(fits, value).alias(column.name))
        return sf.struct(*fields)

    def leaf(self, sub: Column, kind: Type, path: Path) -> tuple[Column, Column]:
        """A value taken whole (a list all or nothing), and whether it fits ``kind``."""
        if isinstance(kind, ListOf):
            items = sf.try_variant_get(sub, "$", "array<variant>")

            def element(x: Column) -> tuple[Column, Column]:
                return self.leaf(x, kind.element, (*path, ELEMENT))

            every = sf.forall(items, lambda x: ~_present(x) | element(x)[1])
            fits = sf.coalesce(items.isNotNull() & every, sf.lit(False))
            values = sf.transform(items, lambda x: sf.when(element(x)[1], element(x)[0]))
            return values, fits
        if isinstance(kind, Struct):
            obj = _is_object(sub)
            parts = [
                (f, self.leaf(_get(sub, f.name), f.type, (*path, f.name)))
                for f in kind.fields
                if addressable(f.name)
            ]
            value = sf.struct(*(sf.when(ok, v).alias(f.name) for f, (v, ok) in parts))
            fits = obj
            for f, (_, ok) in parts:
                fits = fits & (~_present(_get(sub, f.name)) | ok)
            return value, sf.coalesce(fits, sf.lit(False))
        value, fits = _primitive(sub, kind, self.timestamps.get(path))
        return value, sf.coalesce(fits, sf.lit(False))  # never unknown: null would lose it


def _primitive(sub: Column, kind: Type, notation: str | int | None) -> tuple[Column, Column]:
    """A scalar's value and whether it fits (:func:`sparkjobs.table.payload.fits`)."""
    shape = sf.schema_of_variant(sub)
    if isinstance(kind, Decimal):
        return _decimal(sub, shape, kind)
    rules: dict[Primitive, Callable[[Column, Column], tuple[Column, Column]]] = {
        BOOLEAN: lambda s, k: (sf.try_variant_get(s, "$", "boolean"), k == "BOOLEAN"),
        STRING: lambda s, k: (sf.try_variant_get(s, "$", "string"), k == "STRING"),
        INT: _integer("int"),
        LONG: _integer("bigint"),
        DOUBLE: lambda s, k: _floating(s, k, "double", EXACT_DOUBLE_INT),
        FLOAT: lambda s, k: _floating(s, k, "float", EXACT_FLOAT_INT),
    }
    if kind == TIMESTAMP:
        return _timestamp(sub, shape, notation or "iso")
    assert isinstance(kind, Primitive), kind
    return rules[kind](sub, shape)


def _integer(spark_type: str) -> Callable[[Column, Column], tuple[Column, Column]]:
    def rule(sub: Column, shape: Column) -> tuple[Column, Column]:
        value = sf.try_variant_get(sub, "$", spark_type)
        return value, (shape == "BIGINT") & value.isNotNull()

    return rule


def _integral(shape: Column) -> Column:
    return (shape == "BIGINT") | (shape.startswith("DECIMAL(") & shape.endswith(",0)"))


def _floating(sub: Column, shape: Column, spark_type: str, exact: int) -> tuple[Column, Column]:
    value = sf.try_variant_get(sub, "$", spark_type)
    wide = sf.try_variant_get(sub, "$", "double")
    number = (shape == "BIGINT") | (shape == "DOUBLE") | shape.startswith("DECIMAL(")
    finite = ~sf.isnan(wide) & (sf.abs(wide) < sf.lit(float("inf")))
    whole = sf.abs(sf.try_variant_get(sub, "$", "decimal(38,0)")) <= sf.lit(exact)
    fits = (
        number
        & value.isNotNull()
        & finite
        & (~_integral(shape) | sf.coalesce(whole, sf.lit(False)))
    )
    if spark_type == "float":
        fits = fits & (value.cast("double") == wide)
    return value, fits


def _decimal(sub: Column, shape: Column, kind: Decimal) -> tuple[Column, Column]:
    spark_type = f"decimal({kind.precision},{kind.scale})"
    value = sf.try_variant_get(sub, "$", spark_type)
    scale = sf.regexp_extract(shape, r",(\d+)\)$", 1).try_cast("int")
    number = (shape == "BIGINT") | (shape.startswith("DECIMAL(") & (scale <= kind.scale))
    text = sf.try_variant_get(sub, "$", "string")
    exact = rf"^-?[0-9]+(\.[0-9]{{0,{kind.scale}}}0*)?$"
    in_text = (shape == "STRING") & text.rlike(exact)
    return value, value.isNotNull() & (number | in_text)


def _timestamp(sub: Column, shape: Column, notation: str | int) -> tuple[Column, Column]:
    if notation == "iso":
        value = sf.try_variant_get(sub, "$", "string").try_cast("timestamp")
        return value, (shape == "STRING") & value.isNotNull()
    per_second = int(notation)
    number = sf.try_variant_get(sub, "$", "decimal(38,9)")
    micros = (number * sf.lit(1_000_000 // per_second)).try_cast("bigint")
    value = sf.timestamp_micros(micros)
    is_number = (shape == "BIGINT") | shape.startswith("DECIMAL(")
    return value, is_number & micros.isNotNull()


def sample_shape(spark: SparkSession, uris: list[str], payload_format: str) -> str | None:
    """The shape of the object payloads in ``uris`` (landed objects), or None when they
    have none or cannot be read (the run's own pass then finds the shape)."""
    if not uris or payload_format != "json":
        return None
    try:
        lines = parse(spark.read.text(uris).select("value"), payload_format)
        variant = sf.try_parse_json(sf.col("data"))
        is_object = sf.try_variant_get(variant, "$", "struct<>").isNotNull()
        row = (
            lines.filter(sf.col("data_problem").isNull())
            .agg(sf.schema_of_variant_agg(sf.when(is_object, variant)).alias("shape"))
            .first()
        )
    except Exception as exc:  # a damaged object: the run's pass finds the shape instead
        log.warning("payload sample unread; the pass finds the shape", error=str(exc)[:300])
        return None
    shape = None if row is None else row["shape"]
    return shape if isinstance(shape, str) and shape.startswith("OBJECT<") else None
