"""The payload's schema: what type each field of the records' JSON has (issue 48).

Pure decision logic, no Spark and no pyiceberg: a small type system for JSON payloads,
what a value says about its type (:func:`infer`), how two observations combine
(:func:`merge`), and whether a value fits a column (:func:`fits`). The compaction will
infer a window's payload schema with it and merge it into the table's schema
(:mod:`sparkjobs.table.evolve`); a value that does not fit its column goes to the
rescued column.

The types form a join semilattice, so a window's schema does not depend on the order of
its rows (:func:`merge` is commutative, associative and idempotent, :data:`NULL` its
identity):

- ``null`` says nothing (:data:`NULL`); a field seen only as null gets no column yet;
- integers are ``int`` when they fit 32 bits, ``long`` when they fit 64, else
  ``decimal(38, 0)`` when they fit 38 digits; beyond, no numeric type holds them
  (:data:`VARIANT` at that place);
- numbers with a fraction or an exponent are ``double`` (never ``float``, which would
  lose digits; exact decimals need a declared ``decimal(p, s)``); a join of numbers is
  the wider: ``int`` < ``long`` < ``decimal(38, 0)`` < ``double``;
- objects are structs: fields by name, each ``required`` while every object had it and
  it was never null; arrays are lists of their elements' join;
- any other mix (a string and a number, an object and an array) is :data:`VARIANT`:
  no single column type, the field is left in ``data`` and reported.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal as Exact
from typing import Any

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
BIG_DIGITS = 38
"""Digits of the widest exact integer a column holds: Iceberg's ``decimal(38, 0)``."""


@dataclass(frozen=True, slots=True)
class Primitive:
    """``boolean``, ``int``, ``long``, ``double``, ``string``, or (declared only)
    ``float`` and ``timestamp``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Decimal:
    """An exact number: ``precision`` digits, ``scale`` of them after the point."""

    precision: int
    scale: int

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@dataclass(frozen=True, slots=True)
class Field:
    """A struct's field; ``required`` while every object had it, never null."""

    name: str
    type: Type
    required: bool = True


@dataclass(frozen=True, slots=True)
class Struct:
    """An object: fields by name, in name order (so equal structs compare equal)."""

    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        """The field named ``name``, if any."""
        return next((f for f in self.fields if f.name == name), None)

    def __str__(self) -> str:
        inner = ", ".join(f"{f.name}: {f.type}{'' if f.required else '?'}" for f in self.fields)
        return f"struct<{inner}>"


@dataclass(frozen=True, slots=True)
class ListOf:
    """An array of ``element`` (:data:`NULL` for arrays only ever seen empty)."""

    element: Type
    element_required: bool = True

    def __str__(self) -> str:
        return f"list<{self.element}{'' if self.element_required else '?'}>"


@dataclass(frozen=True, slots=True)
class Special:
    """:data:`NULL` (nothing known) or :data:`VARIANT` (no single type holds it)."""

    name: str

    def __str__(self) -> str:
        return self.name


Type = Primitive | Decimal | Struct | ListOf | Special

NULL = Special("null")
VARIANT = Special("variant")
BOOLEAN = Primitive("boolean")
INT = Primitive("int")
LONG = Primitive("long")
FLOAT = Primitive("float")
DOUBLE = Primitive("double")
STRING = Primitive("string")
TIMESTAMP = Primitive("timestamp")
BIG_INTEGER = Decimal(BIG_DIGITS, 0)

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
EXACT_DOUBLE_INT, EXACT_FLOAT_INT = 1 << 53, 1 << 24
"""The largest integers a double and a float hold exactly."""
_NUMBERS = (INT, LONG, BIG_INTEGER, DOUBLE)
"""Numeric types in widening order (a join is the later of the two)."""


def infer(value: Any) -> Type:
    """The type one JSON value (as :func:`json.loads` gives it) says it has."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return INT
        if LONG_MIN <= value <= LONG_MAX:
            return LONG
        return BIG_INTEGER if len(str(abs(value))) <= BIG_DIGITS else VARIANT
    if isinstance(value, float | Exact):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        element: Type = NULL
        required = True
        for item in value:
            element = merge(element, infer(item))
            required = required and item is not None
        return ListOf(element, required)
    if isinstance(value, Mapping):
        return Struct(
            tuple(
                Field(str(k), infer(v), v is not None)
                for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            )
        )
    return VARIANT


def infer_all(values: Iterable[Any]) -> Type:
    """The join of every value's type."""
    found: Type = NULL
    for value in values:
        found = merge(found, infer(value))
    return found


def merge(a: Type, b: Type) -> Type:
    """The narrowest type that holds what ``a`` and ``b`` hold (:data:`VARIANT` if none)."""
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if VARIANT in (a, b):
        return VARIANT
    if a in _NUMBERS and b in _NUMBERS:
        return max(a, b, key=_NUMBERS.index)
    if isinstance(a, Struct) and isinstance(b, Struct):
        return _merge_structs(a, b)
    if isinstance(a, ListOf) and isinstance(b, ListOf):
        return ListOf(merge(a.element, b.element), a.element_required and b.element_required)
    return VARIANT


def _merge_structs(a: Struct, b: Struct) -> Struct:
    names = sorted({f.name for f in a.fields} | {f.name for f in b.fields})
    fields = []
    for name in names:
        x, y = a.field(name), b.field(name)
        if x is None or y is None:
            only = x or y
            assert only is not None
            fields.append(Field(name, only.type, False))  # missing from some objects
        else:
            fields.append(Field(name, merge(x.type, y.type), x.required and y.required))
    return Struct(tuple(fields))


def fits(value: Any, column: Type) -> bool:
    """Whether ``value`` can be stored in a column of type ``column`` without loss
    (null fits any column; a struct's missing or extra fields are its own matter:
    extra ones are new columns, missing ones null)."""
    if value is None or column == VARIANT:
        return value is None
    if isinstance(column, Primitive):
        return _fits_primitive(value, column)
    if isinstance(column, Decimal):
        return _fits_decimal(value, column)
    if isinstance(column, ListOf):
        return isinstance(value, list) and all(fits(item, column.element) for item in value)
    if isinstance(column, Struct):
        return isinstance(value, Mapping) and all(
            fits(value.get(f.name), f.type) for f in column.fields
        )
    return False  # NULL: no column holds a value yet


def _fits_primitive(value: Any, column: Primitive) -> bool:
    if column == BOOLEAN:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if column in (INT, LONG):
        low, high = (INT_MIN, INT_MAX) if column == INT else (LONG_MIN, LONG_MAX)
        return isinstance(value, int) and low <= value <= high
    if column in (FLOAT, DOUBLE):
        if not isinstance(value, int | float | Exact):
            return False
        if isinstance(value, int):  # exactly, or it is rescued: no digit is lost
            return abs(value) <= (EXACT_FLOAT_INT if column == FLOAT else EXACT_DOUBLE_INT)
        number = float(value)
        if not math.isfinite(number):
            return False
        return column == DOUBLE or struct.unpack("f", struct.pack("f", number))[0] == number
    if column == STRING:
        return isinstance(value, str)
    return False  # timestamps: by the declared notation (not inferred)


def _fits_decimal(value: Any, column: Decimal) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | Exact):
        return False
    exact = Exact(str(value)) if isinstance(value, float) else Exact(value)
    if not exact.is_finite():
        return False
    _, digits, exponent = exact.normalize().as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    whole = max(len(digits) + exponent, 0)
    return scale <= column.scale and whole <= column.precision - column.scale


def struct_paths(kind: Type, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field's place reached through structs alone (not into lists)."""
    if not isinstance(kind, Struct):
        return []
    found: list[tuple[str, ...]] = []
    for f in kind.fields:
        found.append((*path, f.name))
        found.extend(struct_paths(f.type, (*path, f.name)))
    return found


def required_paths(schema: Struct) -> frozenset[tuple[str, ...]]:
    """The places of ``schema``'s required fields (through structs alone)."""

    def walk(kind: Struct, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        found: list[tuple[str, ...]] = []
        for f in kind.fields:
            if f.required:
                found.append((*path, f.name))
            if isinstance(f.type, Struct):
                found.extend(walk(f.type, (*path, f.name)))
        return found

    return frozenset(walk(schema, ()))


def with_required(schema: Struct, required: Collection[tuple[str, ...]]) -> Struct:
    """``schema`` with exactly the fields at ``required`` required (through structs;
    a list's parts are all optional)."""

    def walk(kind: Type, path: tuple[str, ...], in_list: bool) -> Type:
        if isinstance(kind, Struct):
            return Struct(
                tuple(
                    Field(
                        f.name,
                        walk(f.type, (*path, f.name), in_list),
                        not in_list and (*path, f.name) in required,
                    )
                    for f in kind.fields
                )
            )
        if isinstance(kind, ListOf):
            return ListOf(walk(kind.element, (*path, "element"), True), element_required=False)
        return kind

    found = walk(schema, (), False)
    assert isinstance(found, Struct)
    return found
