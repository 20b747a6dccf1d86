"""How a table's payload columns follow the producers (issue 48): pure decisions.

Given the table's payload schema (a :class:`~sparkjobs.table.payload.Struct`; empty
before the first typed run) and the schema a window's records showed
(:func:`~sparkjobs.table.payload.infer_all`), :func:`evolve` decides the next schema and
names every change, as Iceberg's schema evolution can make it (by field id, never
rewriting a data file):

- a field never seen before becomes a column: ``required`` when the table is new and
  every record had it set, else optional (Iceberg adds no required column to a table
  with rows);
- a column widens only as Iceberg promotes types: ``int`` to ``long``, ``float`` to
  ``double``, ``decimal(P, S)`` to ``decimal(P', S)`` with ``P'`` > ``P``;
- a required column that some record left out or set to null becomes optional;
- anything else keeps the column as it is: a value that does not fit it goes, as JSON,
  to the rescued column (:class:`Mismatch` names the field; the run counts the values);
- a field whose records disagree on its type (:data:`~sparkjobs.table.payload.VARIANT`)
  or that was only ever null gets no column yet (:class:`Untyped`).

Evolving twice with the same window changes nothing the second time (a re-run adds no
schema version), and a schema only grows: no column is dropped, narrowed or made
required.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sparkjobs.table.payload import (
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    NULL,
    VARIANT,
    Decimal,
    Field,
    ListOf,
    Struct,
    Type,
    merge,
)

Path = tuple[str, ...]
"""A field's place: names from the payload's root; ``element`` for a list's items."""
ELEMENT = "element"


@dataclass(frozen=True, slots=True)
class AddColumn:
    """A new column at ``path``."""

    path: Path
    type: Type
    required: bool


@dataclass(frozen=True, slots=True)
class Widen:
    """A column promoted from ``old`` to ``new``."""

    path: Path
    old: Type
    new: Type


@dataclass(frozen=True, slots=True)
class MakeOptional:
    """A required column that records left out or null."""

    path: Path


Change = AddColumn | Widen | MakeOptional


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Records whose values at ``path`` may not fit the column (``column``; they showed
    ``seen``): those that do not are rescued, the column stays."""

    path: Path
    column: Type
    seen: Type


@dataclass(frozen=True, slots=True)
class Untyped:
    """A field with no column: its records disagree on its type, or it was only null."""

    path: Path
    seen: Type


@dataclass
class Evolution:
    """The next schema, and what made it differ from the table's."""

    schema: Struct
    changes: list[Change] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    untyped: list[Untyped] = field(default_factory=list)


def promotes(old: Type, new: Type) -> bool:
    """Whether Iceberg may change a column of type ``old`` to ``new`` in place."""
    if (old, new) in ((INT, LONG), (FLOAT, DOUBLE)):
        return True
    return (
        isinstance(old, Decimal)
        and isinstance(new, Decimal)
        and old.scale == new.scale
        and new.precision > old.precision
    )


def evolve(
    table: Struct,
    seen: Struct,
    *,
    new_table: bool = False,
    widen: Callable[[Path], bool] | None = None,
) -> Evolution:
    """The table's schema after a window whose records showed ``seen``.

    ``widen``: whether the column at a path needs the wider type ``seen`` suggests (the
    run knows: its values there did not fit and were rescued); not needed, the column
    stays and the change is a :class:`Mismatch`. Default: every promotion is made.
    """
    out = Evolution(Struct(()))
    out.schema = _struct((), table, seen, new_table, out, widen or _always)
    return out


def _always(path: Path) -> bool:
    return True


Widening = Callable[[Path], bool]


def _struct(  # noqa: PLR0917 - the walk's state
    path: Path, table: Struct, seen: Struct, new_table: bool, out: Evolution, widen: Widening
) -> Struct:
    fields: list[Field] = []
    for column in table.fields:
        at = (*path, column.name)
        found = seen.field(column.name)
        if found is None:  # no record of the window had it
            if column.required:
                out.changes.append(MakeOptional(at))
            fields.append(Field(column.name, column.type, False))
        else:
            fields.append(_field(at, column, found, new_table, out, widen))
    for found in seen.fields:
        if table.field(found.name) is None:
            added = _typed(((*path, found.name)), found.type, out)
            if added is not None:
                required = new_table and found.required
                out.changes.append(AddColumn((*path, found.name), added, required))
                fields.append(Field(found.name, added, required))
    return Struct(tuple(sorted(fields, key=lambda f: f.name)))


def _field(  # noqa: PLR0917 - the walk's state
    path: Path, column: Field, found: Field, new_table: bool, out: Evolution, widen: Widening
) -> Field:
    required = column.required and found.required
    if column.required and not found.required:
        out.changes.append(MakeOptional(path))
    kind = _type(path, column.type, found.type, new_table, out, widen)
    return Field(column.name, kind, required)


def _type(  # noqa: PLR0917 - the walk's state
    path: Path, column: Type, seen: Type, new_table: bool, out: Evolution, widen: Widening
) -> Type:
    if seen in (NULL, column):
        return column
    if isinstance(column, Struct) and isinstance(seen, Struct):
        return _struct(path, column, seen, new_table, out, widen)
    if isinstance(column, ListOf) and isinstance(seen, ListOf):
        at = (*path, ELEMENT)
        element = _type(at, column.element, seen.element, new_table, out, widen)
        element_required = column.element_required and seen.element_required
        if column.element_required and not seen.element_required:
            out.changes.append(MakeOptional(at))
        return ListOf(element, element_required)
    joined = merge(column, seen)
    if joined == column:
        return column
    if promotes(column, joined) and widen(path):
        out.changes.append(Widen(path, column, joined))
        return joined
    out.mismatches.append(Mismatch(path, column, seen))
    return column


def _typed(path: Path, seen: Type, out: Evolution) -> Type | None:
    """``seen`` as a new column: its parts with no type left out (and named)."""
    if seen in (NULL, VARIANT):
        out.untyped.append(Untyped(path, seen))
        return None
    if isinstance(seen, Struct):
        fields = []
        for f in seen.fields:
            typed = _typed((*path, f.name), f.type, out)
            if typed is not None:
                fields.append(Field(f.name, typed, f.required))
        return Struct(tuple(fields)) if fields else None
    if isinstance(seen, ListOf):
        element = _typed((*path, ELEMENT), seen.element, out)
        return None if element is None else ListOf(element, seen.element_required)
    return seen
