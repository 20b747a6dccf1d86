"""Which payload schema a run writes with, and when it writes again
(sparkjobs.compaction.payload_plan), and Spark's variant schema text read as payload
types (sparkjobs.table.variant_schema): pure, property-tested."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.compaction.payload_plan import (
    SAMPLE_BYTES,
    SAMPLE_OBJECTS,
    PayloadPlan,
    addressable_only,
    dominant,
    first_schema,
    list_pointer,
    mixed_places,
    next_schema,
    resolve_mixed,
    sample_keys,
    untyped,
)
from sparkjobs.table.declared import read_declared
from sparkjobs.table.evolve import AddColumn, Widen
from sparkjobs.table.payload import (
    BIG_INTEGER,
    BOOLEAN,
    DOUBLE,
    INT,
    LONG,
    NULL,
    STRING,
    VARIANT,
    Field,
    ListOf,
    Struct,
    Type,
)
from sparkjobs.table.variant_schema import read_variant_schema, write_variant_schema

NAMES = st.text(min_size=1, max_size=6).filter(lambda n: "\x00" not in n)
LEAVES: st.SearchStrategy[Type] = st.sampled_from(
    [LONG, DOUBLE, STRING, BOOLEAN, BIG_INTEGER, NULL, VARIANT]
)


def _struct(children: st.SearchStrategy[Type]) -> st.SearchStrategy[Struct]:
    return st.dictionaries(NAMES, children, max_size=4).map(
        lambda d: Struct(tuple(Field(n, t, required=False) for n, t in sorted(d.items())))
    )


TYPES = st.recursive(
    LEAVES,
    lambda children: _struct(children) | children.map(lambda t: ListOf(t, element_required=False)),
    max_leaves=12,
)


@given(_struct(TYPES))
def test_variant_schema_text_reads_back(kind: Struct) -> None:
    """Any schema as Spark writes it (names quoted with backticks, a backtick doubled)
    reads back as the same payload type."""
    assert read_variant_schema(write_variant_schema(kind)) == kind


def test_spark_types_are_read_as_inference_decides() -> None:
    text = (
        "OBJECT<``: BIGINT, `a b`: ARRAY<DECIMAL(21,1)>, `a``b`: DECIMAL(23,0), "
        "c: OBJECT<>, d: VOID, e: VARIANT, f: DOUBLE, g: DATE>"
    )
    assert read_variant_schema(text) == Struct(
        (
            Field("", LONG, False),
            Field("a b", ListOf(DOUBLE, False), False),
            Field("a`b", BIG_INTEGER, False),
            Field("c", Struct(()), False),
            Field("d", NULL, False),
            Field("e", VARIANT, False),
            Field("f", DOUBLE, False),
            Field("g", VARIANT, False),
        )
    )


def test_text_that_is_no_variant_schema_is_refused() -> None:
    for text in ("OBJECT<a BIGINT>", "OBJECT<a: BIGINT", "ARRAY<>", "bigint", "OBJECT<`a: X>"):
        try:
            read_variant_schema(text)
        except ValueError:
            continue
        raise AssertionError(text)


def _fields(**types: Type) -> Struct:
    return Struct(tuple(Field(n, t, False) for n, t in sorted(types.items())))


def test_first_schema_keeps_the_table_adds_declared_and_sampled_fields() -> None:
    table = _fields(id=INT)
    declared = read_declared(
        {"type": "object", "properties": {"ts": {"type": "string", "format": "date-time"}}}
    )
    plan = first_schema(table, declared, "OBJECT<id: BIGINT, name: STRING, n: VOID>")
    # id stays int (a widening is decided by the run); n, only null, has no column.
    assert plan.schema == _fields(id=INT, name=STRING, ts=plan.schema.field("ts").type)  # type: ignore[union-attr]
    assert plan.timestamps == {("ts",): "iso"}
    assert first_schema(None, None, None).schema == Struct(())
    assert not first_schema(None, None, None).writes_columns


def test_names_spark_cannot_address_get_no_column() -> None:
    kind = _fields(**{"ok": LONG, "a'b\"c": LONG})
    assert addressable_only(kind) == _fields(ok=LONG)


def test_a_second_pass_only_for_new_fields_or_needed_widenings() -> None:
    plan = PayloadPlan(_fields(id=INT, name=STRING))
    same = "OBJECT<id: BIGINT, name: STRING>"
    assert next_schema(plan, same, {}) is None  # BIGINT says nothing about 32 bits
    grown = next_schema(plan, same, {("id",): 2})  # values past 32 bits were rescued
    assert grown is not None
    assert grown.changes == [Widen(("id",), INT, LONG)]
    added = next_schema(plan, "OBJECT<id: BIGINT, name: STRING, x: DOUBLE>", {})
    assert added is not None
    assert added.changes == [AddColumn(("x",), DOUBLE, False)]
    assert next_schema(plan, "OBJECT<id: BIGINT, name: VARIANT>", {("name",): 5}) is None
    assert next_schema(plan, None, {}) is None
    assert untyped(plan, "OBJECT<id: BIGINT, name: STRING, m: VARIANT, z: VOID>") == [
        ("m",),
        ("z",),
    ]


def test_a_list_is_rescued_whole() -> None:
    assert list_pointer(("items", "element", "qty")) == ("items",)
    assert list_pointer(("user", "age")) == ("user", "age")
    plan = PayloadPlan(_fields(items=ListOf(_fields(qty=INT), False)))
    shape = "OBJECT<items: ARRAY<OBJECT<qty: BIGINT>>>"
    assert next_schema(plan, shape, {}) is None
    assert next_schema(plan, shape, {("items",): 1}) is not None


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.integers(0, 4 << 20), max_size=80))
def test_the_sample_is_bounded_deterministic_and_never_empty(sizes: dict[str, int]) -> None:
    chosen = sample_keys(sizes)
    assert chosen == sample_keys(dict(reversed(list(sizes.items()))))
    assert set(chosen) <= set(sizes)
    assert bool(chosen) == bool(sizes)
    assert len(chosen) <= SAMPLE_OBJECTS
    assert len(chosen) == 1 or sum(sizes[k] for k in chosen) <= SAMPLE_BYTES


def test_a_mixed_field_takes_its_commoner_kind() -> None:
    """A field a window's sample shows with two kinds gets the commoner kind's column
    (numbers of any width are one kind); the other values will be rescued."""
    assert dominant({"BIGINT": 9, "STRING": 3}) == LONG
    assert dominant({"BIGINT": 2, "DECIMAL(3,1)": 2, "STRING": 3}) == DOUBLE  # 4 numbers
    assert dominant({"STRING": 2, "BOOLEAN": 2}) == BOOLEAN  # a tie: the name first
    assert dominant({"OBJECT<a: BIGINT>": 2, "OBJECT<b: STRING>": 1, "BIGINT": 1}) == _fields(
        a=LONG, b=STRING
    )
    assert dominant({"VOID": 5}) == VARIANT
    seen = read_variant_schema("OBJECT<age: VARIANT, u: OBJECT<x: VARIANT>, l: ARRAY<VARIANT>>")
    assert isinstance(seen, Struct)
    assert mixed_places(seen) == [("age",), ("u", "x")]  # not into lists
    kinds: dict[tuple[str, ...], dict[str, int]] = {("age",): {"BIGINT": 9, "STRING": 3}}
    # x stays untyped, and u with it (no empty struct); the list's element too.
    assert first_schema(None, None, write_variant_schema(seen), kinds).schema == _fields(age=LONG)
    resolved = resolve_mixed(seen, kinds)
    assert resolved.field("age") == Field("age", LONG, False)
    assert resolved.field("u") == seen.field("u")  # not counted: stays mixed


@given(
    st.dictionaries(st.sampled_from(["BIGINT", "STRING", "BOOLEAN", "DOUBLE"]), st.integers(1, 9))
)
def test_the_commoner_kind_does_not_depend_on_order(kinds: dict[str, int]) -> None:
    assert dominant(kinds) == dominant(dict(reversed(list(kinds.items()))))
