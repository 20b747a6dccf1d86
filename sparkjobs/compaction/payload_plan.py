"""Which typed payload columns a run writes, and when it must write again (issue 48).

A run decides its payload schema before it reads, from what it knows then:

1. the table's ``payload`` column (what earlier runs made);
2. the declared schema (``LANDER_PAYLOAD_SCHEMA``), whose fields it adds;
3. a sample of the window: a few objects chosen by a hash of their keys (the same on a
   re-run), their object payloads' shape by ``schema_of_variant_agg``
   (:func:`sparkjobs.compaction.sample.sample_shape`), whose new fields it adds.

The run then writes with that schema and observes the whole window's shape as it
writes. When the window had a field the sample missed, or values a column could hold
only wider (an ``int`` column's values past 32 bits, all of them rescued), the run
writes again with the grown schema (:func:`next_schema`); otherwise the rescued values
stay rescued. At most :data:`PASSES` passes: the second sees every field the first did.

**Required columns.** A column is required only from the run that creates the
``payload`` column (an optional struct may gain required fields; a column added to a
table with rows may not be required, :func:`created_required`): a field every sampled
object had set (never missing, never null, never of a second kind), or one the declared
schema requires and no sampled object left out. A required column stays required until
a run's write sees a record without it (:mod:`sparkjobs.compaction.required` flags
each); the run then makes it optional (:func:`next_schema`, a safe change) and writes
again. Inside lists every part is optional. Fields that Spark's variant paths cannot
name (a name with both ``'`` and ``"``) get no column (:func:`addressable_only`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sparkjobs.table.declared import Declared
from sparkjobs.table.evolve import (
    ELEMENT,
    Evolution,
    MakeOptional,
    Path,
    evolve,
)
from sparkjobs.table.payload import (
    BIG_INTEGER,
    DOUBLE,
    LONG,
    NULL,
    VARIANT,
    Field,
    ListOf,
    Struct,
    Type,
    merge,
    required_paths,
    struct_paths,
    with_required,
)
from sparkjobs.table.variant_schema import read_variant_schema

PASSES = 2
SAMPLE_OBJECTS = 32
SAMPLE_BYTES = 8 << 20
"""At most this many objects and bytes of a window are read for its sample."""


@dataclass(frozen=True, slots=True)
class PayloadPlan:
    """The payload schema a run writes with, and how its timestamps are written."""

    schema: Struct
    timestamps: Mapping[Path, str | int] = field(default_factory=dict)

    @property
    def writes_columns(self) -> bool:
        """Whether there is a column to write (Parquet has no empty struct)."""
        return bool(self.schema.fields)


def addressable(name: str) -> bool:
    """Whether Spark's variant paths can name a field (not with both kinds of quote)."""
    return not ('"' in name and "'" in name)


def addressable_only(kind: Type) -> Type:
    """``kind`` without the fields Spark cannot address, every part optional
    (:func:`with_required` sets the required ones)."""
    if isinstance(kind, Struct):
        return Struct(
            tuple(
                Field(f.name, addressable_only(f.type), required=False)
                for f in kind.fields
                if addressable(f.name)
            )
        )
    if isinstance(kind, ListOf):
        return ListOf(addressable_only(kind.element), element_required=False)
    return kind


def _never(path: Path) -> bool:
    return False


def first_schema(
    table: Struct | None,
    declared: Declared | None,
    sample: str | None,
    kinds: Mapping[Path, Mapping[str, int]] | None = None,
    absent: Mapping[Path, int] | None = None,
) -> PayloadPlan:
    """The schema a run starts with: the table's, the declared fields, the sample's new
    fields (a column is widened only by the run itself, :func:`next_schema`); a field the
    sample shows with two kinds takes its commoner kind (``kinds``: how many sampled
    values had each, by :func:`mixed_places`), the others are rescued.

    Required columns are the table's; with no ``payload`` column yet (``table`` None),
    :func:`created_required` picks them from ``absent`` (how many sampled objects left
    out each place, or set it null) and the declared schema."""
    schema = table or Struct(())
    if declared is not None:
        schema = evolve(schema, declared.type, widen=_never).schema
    seen = read_variant_schema(sample) if sample else None
    if isinstance(seen, Struct):
        seen = resolve_mixed(seen, kinds or {})
        schema = evolve(schema, seen, widen=_never).schema
    found = addressable_only(schema)
    assert isinstance(found, Struct)
    if table is not None:
        required = required_paths(table)
    else:
        required = created_required(
            found, absent or {}, declared.type if declared is not None else None, kinds or {}
        )
    return PayloadPlan(
        with_required(found, required), declared.timestamps if declared is not None else {}
    )


def created_required(
    schema: Struct,
    absent: Mapping[Path, int],
    declared: Struct | None,
    mixed: Collection[Path] = (),
) -> frozenset[Path]:
    """The fields of a new ``payload`` column that are required: a place the sample
    counted (``absent``: how many sampled objects whose parent was set left it out or
    null) with none absent and one kind (not in ``mixed``), or a place the sample did
    not count that the declared schema requires."""
    wanted = required_paths(declared) if declared is not None else frozenset()
    found = set()
    for path in struct_paths(schema):
        counted = absent.get(path)
        if path not in mixed and (counted == 0 if counted is not None else path in wanted):
            found.add(path)
    return frozenset(found)


def mixed_places(seen: Type, path: Path = ()) -> list[Path]:
    """The places (through structs, not into lists) whose values had two kinds."""
    if seen == VARIANT:
        return [path] if path else []
    if isinstance(seen, Struct):
        return [p for f in seen.fields for p in mixed_places(f.type, (*path, f.name))]
    return []


_CATEGORIES = {LONG: "number", DOUBLE: "number", BIG_INTEGER: "number"}


def _category(kind: Type) -> str | None:
    if kind in (NULL, VARIANT):
        return None
    if isinstance(kind, Struct):
        return "object"
    if isinstance(kind, ListOf):
        return "array"
    return _CATEGORIES.get(kind, str(kind))


def dominant(kinds: Mapping[str, int]) -> Type:
    """The type of the commonest kind among values of two or more (``kinds``: how many
    had each ``schema_of_variant`` text): numbers of any width count as one kind, as do
    objects and arrays; ties go to the kind whose name sorts first. The chosen kind's
    values join (:func:`sparkjobs.table.payload.merge`); the others will be rescued."""
    totals: dict[str, int] = {}
    types: dict[str, Type] = {}
    for text, count in sorted(kinds.items()):
        kind = read_variant_schema(text)
        category = _category(kind)
        if category is None:
            continue
        totals[category] = totals.get(category, 0) + count
        types[category] = merge(types.get(category, NULL), kind)
    if not totals:
        return VARIANT
    best = min(totals, key=lambda c: (-totals[c], c))
    return types[best]


def resolve_mixed(seen: Struct, kinds: Mapping[Path, Mapping[str, int]]) -> Struct:
    """``seen`` with each mixed place that ``kinds`` counted given :func:`dominant`'s type."""

    def walk(kind: Type, path: Path) -> Type:
        if kind == VARIANT and path in kinds:
            return dominant(kinds[path])
        if isinstance(kind, Struct):
            return Struct(
                tuple(Field(f.name, walk(f.type, (*path, f.name)), f.required) for f in kind.fields)
            )
        return kind

    found = walk(seen, ())
    assert isinstance(found, Struct)
    return found


def list_pointer(path: Path) -> Path:
    """The place a value at ``path`` is rescued: a list is rescued whole, so a path into
    a list's elements is rescued at the list."""
    return path[: path.index(ELEMENT)] if ELEMENT in path else path


def next_schema(
    plan: PayloadPlan,
    shape: str | None,
    rescued: Mapping[Path, int],
    missing: Mapping[Path, int] | None = None,
) -> Evolution | None:
    """The grown schema to write the window again with, or None when the pass stands.

    ``shape``: the window's object payloads as ``schema_of_variant_agg`` wrote them;
    ``rescued``: how many values each place rescued; ``missing``: how many records left
    each required place out (or null, or rescued it), which makes it optional. A column
    widens only where values were rescued (Spark calls every integer ``BIGINT``: an
    ``int`` column with no value past 32 bits stays ``int``).
    """
    relaxed = sorted(path for path, n in (missing or {}).items() if n)
    required = required_paths(plan.schema) - set(relaxed)
    seen = read_variant_schema(shape) if shape else None
    if isinstance(seen, Struct):
        evolution = evolve(
            plan.schema, seen, widen=lambda path: rescued.get(list_pointer(path), 0) > 0
        )
    else:
        evolution = Evolution(plan.schema)
    grown = addressable_only(evolution.schema)
    assert isinstance(grown, Struct)
    evolution.schema = with_required(grown, required)
    # The shape leaves out what fitted its column: only the write's counts say optional.
    evolution.changes = [c for c in evolution.changes if not isinstance(c, MakeOptional)]
    evolution.changes.extend(MakeOptional(path) for path in relaxed)
    if evolution.changes:
        return evolution
    return None


def untyped(plan: PayloadPlan, shape: str | None) -> list[Path]:
    """Fields the window had that get no column: only null, or of two types (such a
    field is declared, or left in ``data``)."""
    seen = read_variant_schema(shape) if shape else None
    if not isinstance(seen, Struct):
        return []
    return sorted(u.path for u in evolve(plan.schema, seen).untyped)


def sample_keys(read: Mapping[str, int]) -> list[str]:
    """The objects a window's sample reads (``read``: size by key): the first by a hash
    of their keys, up to :data:`SAMPLE_OBJECTS` and :data:`SAMPLE_BYTES` (at least one)."""
    ordered = sorted(read, key=lambda rel: hashlib.blake2b(rel.encode(), digest_size=8).digest())
    chosen: list[str] = []
    total = 0
    for rel in ordered:
        if chosen and (len(chosen) >= SAMPLE_OBJECTS or total + read[rel] > SAMPLE_BYTES):
            break
        chosen.append(rel)
        total += read[rel]
    return chosen
