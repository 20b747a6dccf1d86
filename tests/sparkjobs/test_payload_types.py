"""The payload's type system (sparkjobs.table.payload): the types a window's records
say their fields have, joined in any order to the same schema, and which values fit
which column without loss."""

from __future__ import annotations

import json
from decimal import Decimal as Exact
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.table.payload import (
    BIG_INTEGER,
    BOOLEAN,
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
    infer,
    infer_all,
    merge,
)

KEYS = st.sampled_from(["id", "amount", "tags", "user", "at"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


def _has_variant(t: Type) -> bool:
    if t == VARIANT:
        return True
    if isinstance(t, ListOf):
        return _has_variant(t.element)
    if isinstance(t, Struct):
        return any(_has_variant(f.type) for f in t.fields)
    return False


@given(JSON, JSON, JSON)
def test_the_join_is_commutative_associative_and_idempotent(a: Any, b: Any, c: Any) -> None:
    x, y, z = infer(a), infer(b), infer(c)
    assert merge(x, y) == merge(y, x)
    assert merge(merge(x, y), z) == merge(x, merge(y, z))
    assert merge(x, x) == x
    assert merge(x, NULL) == merge(NULL, x) == x
    assert merge(x, VARIANT) == VARIANT


@given(st.lists(JSON, max_size=8), st.randoms())
def test_a_windows_schema_does_not_depend_on_the_order_of_its_rows(
    values: list[Any], rng: Any
) -> None:
    shuffled = list(values)
    rng.shuffle(shuffled)
    assert infer_all(values) == infer_all(shuffled)


@given(st.lists(JSON, min_size=1, max_size=8))
def test_every_value_fits_the_join_of_its_window_where_one_type_holds_them(
    values: list[Any],
) -> None:
    joined = infer_all(values)
    if joined not in (NULL,) and not _has_variant(joined):
        assert all(fits(v, joined) for v in values), str(joined)


@given(JSON)
def test_a_value_fits_its_own_type_and_survives_json(value: Any) -> None:
    again = json.loads(json.dumps(value))
    assert infer(again) == infer(value)
    if value is not None and not _has_variant(infer(value)):
        assert fits(value, infer(value))


def test_numbers_widen_and_mixes_are_variants() -> None:
    assert infer(7) == INT
    assert infer(2**31) == LONG
    assert infer(2**63) == BIG_INTEGER
    assert infer(10**38) == VARIANT  # 39 digits: no column holds it exactly
    assert infer(1.5) == infer(1e300) == DOUBLE
    assert merge(INT, LONG) == LONG
    assert merge(LONG, DOUBLE) == DOUBLE
    assert merge(STRING, INT) == VARIANT
    assert merge(ListOf(INT), Struct(())) == VARIANT
    assert infer(True) == BOOLEAN
    assert infer([]) == ListOf(NULL)
    assert infer([1, None]) == ListOf(INT, element_required=False)


def test_fields_are_required_while_every_object_has_them_set() -> None:
    joined = infer_all([{"id": 1, "n": None}, {"id": 2, "x": "a"}])
    assert joined == Struct(
        (Field("id", INT, True), Field("n", NULL, False), Field("x", STRING, False))
    )
    assert str(joined) == "struct<id: int, n: null?, x: string?>"


def test_what_fits_loses_nothing() -> None:
    assert fits(2**53, DOUBLE)
    assert not fits(2**53 + 1, DOUBLE)  # a double would round it: rescued instead
    assert fits(2**24, FLOAT)
    assert not fits(0.1, FLOAT)  # not exactly a float32
    assert fits(0.5, FLOAT)
    assert not fits(True, INT)
    assert not fits(2**31, INT)
    assert fits(2**31, LONG)
    assert not fits("3", LONG)
    assert fits(Exact("12.34"), Decimal(4, 2))
    assert not fits(Exact("12.345"), Decimal(5, 2))
    assert not fits(Exact("123.4"), Decimal(4, 2))
    assert fits(10**37, BIG_INTEGER)
    assert not fits(10**38, BIG_INTEGER)
    assert fits(None, LONG)
    assert not fits(1, VARIANT)
    assert fits([1, 2], ListOf(LONG))
    assert not fits([1, "2"], ListOf(LONG))
    assert fits({"id": 1, "extra": "x"}, Struct((Field("id", LONG),)))
    assert not fits({"id": "1"}, Struct((Field("id", LONG),)))
