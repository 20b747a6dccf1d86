"""Required payload columns (issue 48): which fields a run writes required, when a
write relaxes one, and how the write makes them non-nullable.

The decisions (sparkjobs.compaction.payload_plan) are pure and property-tested; the
write (sparkjobs.compaction.required) is checked in Spark on typed structs of both
engines: the schema Spark writes, the values, and the flags.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.compaction import typedjvm
from sparkjobs.compaction.payload_plan import (
    PayloadPlan,
    created_required,
    first_schema,
    next_schema,
)
from sparkjobs.compaction.required import enforce
from sparkjobs.compaction.typed import typed_frame
from sparkjobs.table.declared import read_declared
from sparkjobs.table.evolve import AddColumn, MakeOptional
from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Decimal,
    Field,
    ListOf,
    Struct,
    Type,
    required_paths,
    struct_paths,
    with_required,
)
from sparkjobs.table.variant_schema import write_variant_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMES = st.sampled_from(["a", "b", "c", "id", "user"])
LEAVES: st.SearchStrategy[Type] = st.sampled_from([LONG, DOUBLE, STRING, BOOLEAN])


def _struct(children: st.SearchStrategy[Type]) -> st.SearchStrategy[Struct]:
    return st.dictionaries(NAMES, st.tuples(children, st.booleans()), min_size=1, max_size=3).map(
        lambda d: Struct(tuple(Field(n, t, r) for n, (t, r) in sorted(d.items())))
    )


TYPES = st.recursive(
    LEAVES,
    lambda children: _struct(children) | children.map(lambda t: ListOf(t, False)),
    max_leaves=10,
)
SCHEMAS = _struct(TYPES)


def _opt(**types: Type) -> Struct:
    return Struct(tuple(Field(n, t, False) for n, t in sorted(types.items())))


def _req(**types: Type) -> Struct:
    return Struct(tuple(Field(n, t, True) for n, t in sorted(types.items())))


@given(SCHEMAS, st.data())
def test_with_required_sets_exactly_the_places_given(schema: Struct, data: st.DataObject) -> None:
    places = struct_paths(schema)
    chosen = data.draw(st.sets(st.sampled_from(places)) if places else st.just(set()))
    made = with_required(schema, chosen)
    assert required_paths(made) == chosen
    assert with_required(made, required_paths(made)) == made  # idempotent
    assert with_required(made, ()) == with_required(schema, ())  # only flags change


@given(SCHEMAS, st.data())
def test_a_pass_only_relaxes_what_records_left_out(schema: Struct, data: st.DataObject) -> None:
    """The next schema's required places are the plan's less those with records
    without a value: never one more, and never one fewer because the window's shape
    (which leaves out what fitted) does not show it."""
    plan = PayloadPlan(schema)
    required = required_paths(schema)
    missing = data.draw(
        st.dictionaries(st.sampled_from(sorted(required)), st.integers(0, 3))
        if required
        else st.just({})
    )
    shape = data.draw(st.sampled_from([None, "OBJECT<>", write_variant_schema(schema)]))
    grown = next_schema(plan, shape, {}, missing)
    relaxed = {path for path, n in missing.items() if n}
    if grown is None:
        assert not relaxed
        return
    assert required_paths(grown.schema) == required - relaxed
    assert {c.path for c in grown.changes if isinstance(c, MakeOptional)} == relaxed


def test_a_new_payload_column_requires_what_every_sampled_object_set() -> None:
    shape = "OBJECT<id: BIGINT, tags: ARRAY<STRING>, user: OBJECT<age: BIGINT, name: STRING>>"
    absent = {("id",): 0, ("tags",): 0, ("user",): 0, ("user", "age"): 2, ("user", "name"): 0}
    plan = first_schema(None, None, shape, {}, absent)
    assert plan.schema == _req(
        id=LONG,
        tags=ListOf(STRING, False),  # a list's parts are optional
        user=Struct((Field("age", LONG, False), Field("name", STRING, True))),
    )
    # A place with two kinds is never required: the other kind's values are rescued.
    mixed = first_schema(None, None, "OBJECT<id: VARIANT>", {("id",): {"BIGINT": 3, "STRING": 1}})
    assert mixed.schema == _opt(id=LONG)
    assert created_required(_opt(id=LONG), {("id",): 0}, None, [("id",)]) == frozenset()
    # Not counted by the sample (none read): optional.
    assert first_schema(None, None, shape).schema == with_required(
        first_schema(None, None, shape).schema, ()
    )


def test_declared_required_fields_are_required_unless_the_sample_left_them_out() -> None:
    declared = read_declared(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["id"],
        }
    )
    assert first_schema(None, declared, None).schema == Struct(
        (Field("id", LONG, True), Field("note", STRING, False))
    )
    left_out = first_schema(None, declared, "OBJECT<id: BIGINT>", {}, {("id",): 1})
    assert left_out.schema.field("id") == Field("id", LONG, False)
    # Not declared required, but every sampled object set it: required.
    always = first_schema(None, declared, "OBJECT<note: STRING>", {}, {("note",): 0})
    assert always.schema.field("note") == Field("note", STRING, True)


def test_an_existing_column_keeps_its_requirement_until_a_write_relaxes_it() -> None:
    table = _req(id=LONG, name=STRING)
    declared = read_declared({"type": "object", "properties": {"id": {"type": "integer"}}})
    # The declared (optional id), the sample (no name, id left out once) change nothing:
    # only the write's counts relax a column; a new field is optional.
    plan = first_schema(table, declared, "OBJECT<id: BIGINT, x: DOUBLE>", {}, {("id",): 1})
    assert plan.schema == Struct(
        (Field("id", LONG, True), Field("name", STRING, True), Field("x", DOUBLE, False))
    )
    assert next_schema(plan, "OBJECT<x: DOUBLE>", {}, {("id",): 0}) is None
    relaxed = next_schema(plan, "OBJECT<x: DOUBLE, y: STRING>", {}, {("name",): 4})
    assert relaxed is not None
    assert relaxed.changes == [AddColumn(("y",), STRING, False), MakeOptional(("name",))]
    assert relaxed.schema == Struct(
        (
            Field("id", LONG, True),
            Field("name", STRING, False),
            Field("x", DOUBLE, False),
            Field("y", STRING, False),
        )
    )


SCHEMA = Struct(
    (
        Field("amount", Decimal(10, 2), True),
        Field("id", LONG, True),
        Field("note", STRING, False),
        Field("tags", ListOf(STRING, False), True),
        Field("ts", TIMESTAMP, True),
        Field(
            "user",
            Struct((Field("age", INT, True), Field("name", STRING, False))),
            False,
        ),
    )
)
PAYLOADS = [
    {"amount": 1.5, "id": 1, "tags": ["x"], "ts": "2026-11-21T00:00:00Z", "user": {"age": 3}},
    {"amount": 2, "id": 2, "tags": [], "ts": "2026-11-21T01:00:00Z"},  # no user: fine
    {"amount": 3, "id": "three", "tags": ["y"], "ts": "2026-11-21T02:00:00Z"},  # rescued
    {"amount": 4, "tags": ["z"], "ts": "2026-11-21T03:00:00Z", "user": {"name": "n"}},
    {"amount": None, "id": 5, "tags": None, "ts": "2026-11-21T04:00:00Z", "user": None},
    [1, 2],  # not an object: no payload, nothing required
]


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["jvm", "spark"])
def test_the_write_makes_required_fields_non_nullable_and_flags_records_without(
    spark: SparkSession, engine: str
) -> None:
    rows = spark.createDataFrame(
        [(i, json.dumps(p)) for i, p in enumerate(PAYLOADS)], "n int, d string"
    )
    made = typedjvm.typed_frame(rows, rows["d"], SCHEMA) if engine == "jvm" else None
    assert (made is None) == (engine == "spark")
    rows, typed = made or typed_frame(rows, rows["d"], SCHEMA)
    payload, flags = enforce(typed.payload, SCHEMA)
    names = {path: f"m_{'_'.join(path)}" for path in flags}
    out = rows.select("n", payload.alias("payload"), *(f.alias(names[p]) for p, f in flags.items()))
    kind = out.schema["payload"].dataType
    assert out.schema["payload"].nullable
    nullable = {f.name: f.nullable for f in kind.fields}  # type: ignore[attr-defined]
    assert nullable == {
        "amount": False,
        "id": False,
        "note": True,
        "tags": False,
        "ts": False,
        "user": True,
    }
    user = kind["user"].dataType  # type: ignore[index]
    assert {f.name: f.nullable for f in user.fields} == {"age": False, "name": True}
    assert sorted(flags) == [("amount",), ("id",), ("tags",), ("ts",), ("user", "age")]
    got = {r["n"]: r for r in out.collect()}
    missing = {n: sorted(p for p, name in names.items() if r[name]) for n, r in got.items()}
    assert missing == {
        0: [],
        1: [],
        2: [("id",)],  # rescued: no value in the column
        3: [("id",), ("user", "age")],
        4: [("amount",), ("tags",)],
        5: [],
    }
    assert got[5]["payload"] is None
    assert got[0]["payload"]["user"].asDict() == {"age": 3, "name": None}
    assert got[1]["payload"]["user"] is None  # an optional struct stays null
    assert got[4]["payload"]["tags"] == []  # a placeholder: the run writes again


@given(SCHEMAS, st.data())
def test_a_new_column_requires_only_places_the_sample_saw_always_set(
    schema: Struct, data: st.DataObject
) -> None:
    places = struct_paths(schema)
    absent = data.draw(st.dictionaries(st.sampled_from(places), st.integers(0, 2)))
    mixed = data.draw(st.sets(st.sampled_from(places)))
    declared = with_required(schema, data.draw(st.sets(st.sampled_from(places))))
    found = created_required(schema, absent, declared, mixed)
    for path in places:
        counted = absent.get(path)
        expected = counted == 0 if counted is not None else path in required_paths(declared)
        assert (path in found) == (expected and path not in mixed), path
