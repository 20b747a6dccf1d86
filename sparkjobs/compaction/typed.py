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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from sparkjobs.compaction.payload_plan import addressable
from sparkjobs.table.evolve import ELEMENT, Path
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

Timestamps = Mapping[Path, str | int]
"""How each declared timestamp is written (``iso`` or units per second), by path
(``element`` for a list's items), as :class:`sparkjobs.table.declared.Declared` says."""


@dataclass
class Typed:
    """The typed columns of one row, and where its values were rescued."""

    payload: Column
    """The payload's fields, as the table's ``payload`` struct (null for a payload that
    is not a JSON object)."""
    rescued: Column
    """JSON object of the rescued values by pointer, or null."""
    shape: Column
    """What of the payload the window's shape is read from (``schema_of_variant_agg``):
    the parsed payload when it is an object, or only what the schema does not hold."""
    flags: dict[Path, Column] = field(default_factory=dict)
    """Per place: whether this row's value there was rescued."""
    places: Column | None = None
    """The indexes of the places rescued, as text (``3,7``; null: none), where one
    aggregate adds them up (:mod:`sparkjobs.compaction.typedjvm`); None: count the
    flags."""


_V, _ROOT = "_typed_v", "_typed_root"


def typed_frame(
    rows: DataFrame, data: Column, schema: Struct, timestamps: Timestamps | None = None
) -> tuple[DataFrame, Typed]:
    """``rows`` with the helper columns the typed columns of ``data`` (a payload's JSON
    text; null for none) are made from, and those columns, by ``schema``.

    Step by step, each a projection of its own, so that what several expressions use is
    computed once per row (Spark's common subexpressions did not reach into the
    branches: parsing once per field cost ~12 us a field): the payload parsed; the value
    at each place; its kind (``schema_of_variant``), an array's items, whether an object
    is one; whether each value fits. The typed columns then only pick.
    """
    if not schema.fields:  # Parquet has no empty group: such a struct is no column
        raise ValueError("no column for an empty payload schema")
    builder = _Builder(timestamps or {})
    places = places_of(schema)
    rows = rows.select("*", sf.try_parse_json(data).alias(_V))
    subs = {path: f"_typed_s{i}" for i, (path, _) in enumerate(places)}
    rows = rows.select(
        "*",
        is_object(sf.col(_V)).alias(_ROOT),
        *(value_at(sf.col(_V), path).alias(subs[path]) for path, _ in places),
    )
    shapes = {path: f"_typed_k{i}" for i, (path, _) in enumerate(places)}
    rows = rows.select(
        "*",
        *(
            builder.shape_of(sf.col(subs[path]), kind, path).alias(shapes[path])
            for path, kind in places
        ),
    )
    values: dict[Path, Column] = {}
    fits: dict[Path, str] = {}
    checks = []
    for i, (path, kind) in enumerate(places):
        if isinstance(kind, Struct):
            continue
        sub, shape = sf.col(subs[path]), sf.col(shapes[path])
        values[path], ok = builder.leaf(sub, kind, path, shape)
        fits[path] = f"_typed_f{i}"
        checks.append(sf.coalesce(ok, sf.lit(False)).alias(fits[path]))
    rows = rows.select("*", *checks)

    def build(struct: Struct, path: Path) -> Column:
        fields = []
        for column in struct.fields:
            at = (*path, column.name)
            sub = sf.col(subs[at])
            if isinstance(column.type, Struct):
                obj = sf.col(shapes[at])  # an object's "shape" is whether it is one
                builder.rescued.append((at, _present(sub) & ~obj, sub))
                fields.append(sf.when(obj, build(column.type, at)).alias(column.name))
            else:
                ok = sf.col(fits[at])
                builder.rescued.append((at, _present(sub) & ~ok, sub))
                fields.append(sf.when(ok, values[at]).alias(column.name))
        return sf.struct(*fields)

    value = build(schema, ())
    parts = [
        sf.when(bad, sf.concat(sf.lit(json.dumps(pointer_of(path)) + ":"), sf.to_json(sub)))
        for path, bad, sub in builder.rescued
    ]
    joined = sf.concat(sf.lit("{"), sf.concat_ws(",", *parts), sf.lit("}"))
    root = sf.col(_ROOT)
    return rows, Typed(
        payload=sf.when(root, value).cast(to_spark(schema)),
        rescued=sf.nullif(joined, sf.lit("{}")).cast("string"),
        shape=sf.when(root, sf.col(_V)),
        flags={path: bad for path, bad, _ in builder.rescued},
    )


def places_of(schema: Struct, path: Path = ()) -> list[tuple[Path, Type]]:
    """Every field of ``schema`` through its structs (a struct, then its fields), in
    order: the places a value may be rescued at (a list is taken or rescued whole)."""
    found: list[tuple[Path, Type]] = []
    for column in schema.fields:
        at = (*path, column.name)
        found.append((at, column.type))
        if isinstance(column.type, Struct):
            if not column.type.fields:
                raise ValueError(f"no column for the empty struct at {pointer_of(at)}")
            found.extend(places_of(column.type, at))
    return found


def value_at(variant: Column, path: Path) -> Column:
    """The value at ``path`` (null where a name cannot be addressed)."""
    if not all(addressable(name) for name in path):
        return sf.lit(None).cast("variant")
    segments = "".join(_segment(name)[1:] for name in path)
    return sf.variant_get(variant, "$" + segments, "variant")


_FLAT: dict[Primitive, tuple[str, tuple[str, ...]]] = {
    BOOLEAN: ("boolean", ("ARRAY<BOOLEAN>",)),
    STRING: ("string", ("ARRAY<STRING>",)),
    INT: ("int", ("ARRAY<BIGINT>",)),
    LONG: ("bigint", ("ARRAY<BIGINT>",)),
}


def _flat(kind: ListOf) -> str | None:
    """The Spark element type of a list checked whole by its kind, without a function
    per element (Spark evaluates those interpreted: ~10 us a list): a list of booleans,
    strings or integers. A list of numbers of other types goes element by element: its
    kind is the elements' join (an integer past 2^53 among fractions is a ``DOUBLE``
    list), and a cast to it nulls an element that overflows instead of failing."""
    element = kind.element
    return _FLAT[element][0] if isinstance(element, Primitive) and element in _FLAT else None


def _flat_list(sub: Column, shape: Column, kind: ListOf, spark_type: str) -> tuple[Column, Column]:
    """A list of scalars whose kind (``ARRAY<…>``, the elements' join) says whether all
    fit: ``ARRAY<VOID>`` (only nulls) or the element's own kind; an ``int``'s elements
    within 32 bits (the cast nulls one past them)."""
    value = sf.try_variant_get(sub, "$", f"array<{spark_type}>")
    element = kind.element
    assert isinstance(element, Primitive)
    fits = (shape == "ARRAY<VOID>") | shape.isin(*_FLAT[element][1])
    if element == INT:
        wide = sf.try_variant_get(sub, "$", "array<bigint>")
        low, high = sf.array_min(wide), sf.array_max(wide)
        within = (low >= sf.lit(-(2**31))) & (high < sf.lit(2**31))
        fits = fits & sf.coalesce(within, sf.lit(True))
    return value, value.isNotNull() & fits


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


def is_object(sub: Column) -> Column:
    return sf.try_variant_get(sub, "$", "struct<>").isNotNull()


class _Builder:
    """Builds the columns of a struct; collects the places values may be rescued."""

    def __init__(self, timestamps: Timestamps) -> None:
        self.timestamps = timestamps
        self.rescued: list[tuple[Path, Column, Column]] = []

    def shape_of(self, sub: Column, kind: Type, path: Path) -> Column:
        """What the check of a value reads: a struct's whether it is an object, a list of
        scalars' kind, another list's elements each checked (:meth:`pairs`), a scalar's
        kind."""
        if isinstance(kind, Struct):
            return is_object(sub)
        if isinstance(kind, ListOf) and _flat(kind) is None:
            return self.pairs(sub, kind, path)
        return sf.schema_of_variant(sub)

    def pairs(self, sub: Column, kind: ListOf, path: Path) -> Column:
        """Each element's value (``v``) and whether it fits (``ok``: a null fits), in one
        pass over the array: Spark evaluates a function per element interpreted."""
        items = sf.try_variant_get(sub, "$", "array<variant>")

        def one(x: Column) -> Column:
            value, ok = self.leaf(x, kind.element, (*path, ELEMENT))
            return sf.struct(sf.when(ok, value).alias("v"), (~_present(x) | ok).alias("ok"))

        return sf.transform(items, one)

    def leaf(
        self, sub: Column, kind: Type, path: Path, shape: Column | None = None
    ) -> tuple[Column, Column]:
        """A value taken whole (a list all or nothing), and whether it fits ``kind``
        (``shape``: the scalar's kind, when it is a column already)."""
        if isinstance(kind, ListOf):
            flat = _flat(kind)
            if flat is not None:
                return _flat_list(
                    sub, sf.schema_of_variant(sub) if shape is None else shape, kind, flat
                )
            pairs = self.pairs(sub, kind, path) if shape is None else shape
            every = ~sf.array_contains(pairs.getField("ok"), False)
            return pairs.getField("v"), sf.coalesce(pairs.isNotNull() & every, sf.lit(False))
        if isinstance(kind, Struct):
            obj = is_object(sub)
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
        value, fits = _primitive(sub, kind, self.timestamps.get(path), shape)
        return value, sf.coalesce(fits, sf.lit(False))  # never unknown: null would lose it


def _primitive(
    sub: Column, kind: Type, notation: str | int | None, shape: Column | None = None
) -> tuple[Column, Column]:
    """A scalar's value and whether it fits (:func:`sparkjobs.table.payload.fits`)."""
    shape = sf.schema_of_variant(sub) if shape is None else shape
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
    # Bounded first: under ANSI a product past decimal(38,6) fails the query, and any
    # number from 1e20 on is past a long's microseconds whatever the unit.
    fits = sf.abs(number) < sf.lit(1e20)
    micros = sf.when(fits, number * sf.lit(1_000_000 // per_second)).try_cast("bigint")
    value = sf.timestamp_micros(micros)
    is_number = (shape == "BIGINT") | shape.startswith("DECIMAL(")
    return value, is_number & micros.isNotNull()
