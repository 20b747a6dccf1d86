"""How the table's payload columns follow the producers (sparkjobs.table.evolve): a
schema only grows, as Iceberg can change it in place; a re-run changes nothing; what
does not fit is named, and only that is rescued."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.table.evolve import (
    AddColumn,
    MakeOptional,
    Mismatch,
    Untyped,
    Widen,
    evolve,
    promotes,
)
from sparkjobs.table.payload import (
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    NULL,
    STRING,
    VARIANT,
    Decimal,
    Field,
    ListOf,
    Struct,
    Type,
    fits,
    infer_all,
)
from tests.sparkjobs.test_payload_types import JSON

RECORDS = st.lists(st.dictionaries(st.sampled_from(["id", "amount", "tags", "user"]), JSON))


def _columns(schema: Type, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Field]:
    found: dict[tuple[str, ...], Field] = {}
    if isinstance(schema, Struct):
        for f in schema.fields:
            found[(*path, f.name)] = f
            found.update(_columns(f.type, (*path, f.name)))
    elif isinstance(schema, ListOf):
        found.update(_columns(schema.element, (*path, "element")))
    return found


def _schema(records: list[dict[str, Any]]) -> Struct:
    seen = infer_all(records)
    return seen if isinstance(seen, Struct) else Struct(())


@given(RECORDS, RECORDS)
def test_a_rerun_changes_nothing(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> None:
    table = evolve(Struct(()), _schema(first), new_table=True).schema
    once = evolve(table, _schema(second))
    again = evolve(once.schema, _schema(second))
    assert again.changes == []
    assert again.schema == once.schema


@given(RECORDS, RECORDS)
def test_a_schema_only_grows_as_iceberg_can_change_it(
    first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    table = evolve(Struct(()), _schema(first), new_table=True).schema
    after = evolve(table, _schema(second))
    before, now = _columns(table), _columns(after.schema)
    for path, column in before.items():
        assert path in now, f"column {path} dropped"
        kept = now[path]
        assert (
            kept.type == column.type
            or promotes(column.type, kept.type)
            or (isinstance(column.type, Struct | ListOf) and type(kept.type) is type(column.type))
        )
        assert column.required or not kept.required, f"{path} made required"
    for change in after.changes:
        if isinstance(change, AddColumn):
            assert not change.required, "a required column added to a table with rows"


@given(RECORDS)
def test_every_record_fits_unless_a_mismatch_is_named(records: list[dict[str, Any]]) -> None:
    evolution = evolve(Struct(()), _schema(records), new_table=True)
    assert evolution.mismatches == []  # a new table takes what it saw
    assert all(fits(record, evolution.schema) for record in records)


def test_a_drifting_producer() -> None:
    day1: list[dict[str, Any]] = [
        {"id": 1, "amount": 5, "user": {"name": "a"}},
        {"id": 2, "amount": 7, "user": None},
    ]
    table = evolve(Struct(()), _schema(day1), new_table=True)
    assert table.schema == Struct(
        (
            Field("amount", INT, True),
            Field("id", INT, True),
            Field("user", Struct((Field("name", STRING, True),)), False),
        )
    )
    day2: list[dict[str, Any]] = [
        {"id": 3_000_000_000, "amount": 2.5, "user": {"name": "b", "tier": 3}, "tags": []},
        {"id": 4, "amount": "n/a", "note": None, "user": {"name": None}},
    ]
    evolution = evolve(table.schema, _schema(day2))
    assert Widen(("id",), INT, LONG) in evolution.changes
    assert AddColumn(("user", "tier"), INT, False) in evolution.changes
    assert MakeOptional(("user", "name")) in evolution.changes
    assert Mismatch(("amount",), INT, VARIANT) in evolution.mismatches  # 2.5 and "n/a"
    assert Untyped(("note",), NULL) in evolution.untyped
    assert Untyped(("tags", "element"), NULL) in evolution.untyped  # only empty lists
    assert evolution.schema.field("tags") is None
    assert not fits(day2[0], evolution.schema)  # its amount is rescued


def test_promotions_are_icebergs() -> None:
    assert promotes(INT, LONG)
    assert promotes(FLOAT, DOUBLE)
    assert promotes(Decimal(10, 2), Decimal(12, 2))
    assert not promotes(Decimal(10, 2), Decimal(12, 3))
    assert not promotes(LONG, DOUBLE)
    assert not promotes(INT, DOUBLE)
    assert not promotes(LONG, INT)
