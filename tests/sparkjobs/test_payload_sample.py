"""The payload sample (issue 48): counts read from each sampled object's shape.

:func:`sparkjobs.compaction.sample.sample_shape` asks Spark for one thing, the shape of
each sampled object (``schema_of_variant``) and their join, and reads the per-place
counts from those shapes in Python. Two checks hold it to what it replaced:

- property-tested: :func:`kinds_of` and :func:`absent_of` over the shapes of generated
  objects give what walking the objects themselves gives;
- in Spark: on landed objects of drifting payloads, the sample equals the counts Spark
  makes place by place (``variant_get`` at each path, ``schema_of_variant`` of the
  value, ``count_if``), as the sample computed them before.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import parse
from sparkjobs.compaction.payload_plan import addressable, mixed_places
from sparkjobs.compaction.sample import absent_of, kinds_of, sample_shape
from sparkjobs.compaction.typed import is_object, value_at
from sparkjobs.table.evolve import Path
from sparkjobs.table.payload import (
    BIG_INTEGER,
    BOOLEAN,
    DOUBLE,
    LONG,
    NULL,
    STRING,
    Field,
    ListOf,
    Struct,
    Type,
    merge,
    struct_paths,
)
from sparkjobs.table.variant_schema import read_variant_schema, write_variant_schema
from tests.support.landed import line, write_object

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_MISSING = object()
NAMES = st.sampled_from(["a", "b", "id", "`x y`", "q\"'q"])  # the last: not addressable
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(NAMES, children, max_size=3)
    ),
    max_leaves=8,
)
OBJECTS = st.lists(st.dictionaries(NAMES, VALUES, max_size=4), min_size=1, max_size=12)


def _kind(value: Any) -> Type:
    """What ``schema_of_variant`` says of a parsed JSON value, as payload types."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG if -(2**63) <= value < 2**63 else BIG_INTEGER
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        element: Type = NULL
        for item in value:
            element = merge(element, _kind(item))
        return ListOf(element, element_required=False)
    fields = (Field(name, _kind(v), required=False) for name, v in sorted(value.items()))
    return Struct(tuple(fields))


def _at(value: Any, path: Path) -> Any:
    for name in path:
        if not isinstance(value, dict) or not addressable(name) or name not in value:
            return _MISSING
        value = value[name]
    return value


def _set(value: Any) -> bool:
    return value is not _MISSING and value is not None


@settings(max_examples=200, deadline=None)
@given(OBJECTS)
def test_counts_from_shapes_are_the_objects_counts(objects: list[dict[str, Any]]) -> None:
    texts = Counter(write_variant_schema(_kind(o)) for o in objects)
    shapes = [(read_variant_schema(text), n) for text, n in texts.items()]
    joined: Type = NULL
    for o in objects:
        joined = merge(joined, _kind(o))
    assert isinstance(joined, Struct)
    paths = sorted({*struct_paths(joined), ("absent",), ("a", "absent")})
    expected_absent = {
        path: sum(1 for o in objects if _set(_at(o, path[:-1])) and not _set(_at(o, path)))
        for path in paths
    }
    assert absent_of(shapes, paths) == expected_absent

    expected_kinds: dict[Path, Counter[str]] = {}
    for path in paths:
        for o in objects:
            value = _at(o, path)
            if _set(value):
                expected_kinds.setdefault(path, Counter())[write_variant_schema(_kind(value))] += 1
    assert kinds_of(shapes, paths) == {p: dict(c) for p, c in expected_kinds.items()}
    assert kinds_of(shapes, []) == {}


PAYLOADS = [
    b'{"id": 1, "name": "a", "n": {"x": 1, "y": "s"}, "tags": [1, 2], "amt": 1.5}',
    b'{"id": "7", "n": {"x": null}, "big": 123456789012345678901234567890, "dec": 12.25}',
    b'{"id": 2.5, "n": "text", "name": null, "tags": [], "a\\"\'b": 1, "odd `name`": true}',
    b'{"id": 3, "n": {"x": {"deep": 1}}, "e": {}, "arr": [{"k": 1}, {"k": "v"}]}',
    b'{"id": 4, "n": {"x": 2, "y": null}, "amt": 2, "dec": 1e300, "tags": [1.5, "x"]}',
    b"{}",
    b"[1, 2]",
    b'"text"',
    b'{"dup": 1, "dup": 2}',
]


Counts = tuple[str, dict[Path, Counter[str]], dict[Path, int]]


def _reference(objects: DataFrame, declared: Struct) -> Counts:
    """The counts made in Spark place by place, as the sample made them before."""
    shape = objects.agg(sf.schema_of_variant_agg("v")).first()[0]  # type: ignore[index]
    seen = read_variant_schema(shape)
    kinds: dict[Path, Counter[str]] = {}
    for path in mixed_places(seen):
        kind = sf.schema_of_variant(value_at(sf.col("v"), path)).alias("k")
        for row in objects.select(kind).filter("k IS NOT NULL AND k != 'VOID'").collect():
            # The sample names a kind as it reads it back: DECIMAL(3,1) is DOUBLE.
            name = write_variant_schema(read_variant_schema(row["k"]))
            kinds.setdefault(path, Counter())[name] += 1

    def present(value: Any) -> Any:
        return value.isNotNull() & ~sf.is_variant_null(value)

    paths = sorted({*struct_paths(seen), *struct_paths(declared)})
    v = sf.col("v")
    counts = [
        sf.count_if(present(value_at(v, p[:-1]) if p[:-1] else v) & ~present(value_at(v, p)))
        for p in paths
    ]
    totals = objects.agg(*counts).first()
    assert totals is not None
    return shape, kinds, {p: int(totals[i]) for i, p in enumerate(paths)}


def test_sample_equals_spark_counts_place_by_place(spark: SparkSession, tmp_path: FsPath) -> None:
    archive = tmp_path / "archive"
    uris = []
    for i in range(3):  # each object holds the payloads once more: counts of 3 each
        lines = [
            line("shardId-000000000000", 10 * i + n, "2026-11-20T05:00:00.000Z", None, data)
            for n, data in enumerate(PAYLOADS)
        ]
        path = write_object(archive, f"2026-11-20T05:0{i}", "shardId-000000000000", lines)
        uris.append(f"file://{path}")  # as the job names them: "=" not escaped
    declared = Struct(
        (
            Field("n", Struct((Field("z", LONG, required=True),)), required=True),
            Field("gone", STRING, required=True),
        )
    )
    got = sample_shape(spark, uris, "json", declared)

    lines_df = parse(spark.read.text(uris).select("value"), "json")
    variant = sf.try_parse_json(sf.col("data"))
    objects = (
        lines_df.filter(sf.col("data_problem").isNull())
        .select(sf.when(is_object(variant), variant).alias("v"))
        .filter(sf.col("v").isNotNull())
    )
    shape, kinds, absent = _reference(objects, declared)
    assert got.shape == shape
    assert got.kinds == {p: dict(c) for p, c in kinds.items()}
    assert got.absent == absent
    # What the payloads hold, so the comparison covers it: mixed places, nested and
    # declared-only places, a name Spark cannot address.
    assert {("id",), ("n",)} <= set(got.kinds)
    assert got.kinds[("id",)] == {"BIGINT": 9, "STRING": 3, "DOUBLE": 3}
    assert got.absent[("gone",)] == 18  # six objects a file: the others are no objects
    assert got.absent[("n", "z")] == 15  # every set n: four objects and a string
    assert got.absent[("amt",)] == 12  # in two objects a file
