"""What a run learns of its window's payloads before it writes (issue 48): a sample.

A few of the window's objects (:func:`sparkjobs.compaction.payload_plan.sample_keys`)
are read and parsed once into variants, in one Spark job that gives the shape of each
object payload (``schema_of_variant``), how many had each shape, and all of them
joined (``schema_of_variant_agg``). :func:`sample_shape` then gives, from those:

- their object payloads' shape, whose new fields the run adds as columns;
- at each place whose values had two kinds, how many had each (the commoner kind makes
  the column, :func:`sparkjobs.compaction.payload_plan.dominant`);
- at each field's place (through objects, not into arrays), how many objects whose
  parent was set left it out or null: a place none left out may be a required column
  when the run creates the ``payload`` column
  (:func:`sparkjobs.compaction.payload_plan.created_required`).

The counts are read from the distinct shapes in Python (:func:`kinds_of`,
:func:`absent_of`: pure, one walk of each shape): a sampled object's shape says, place
by place, what ``schema_of_variant`` of its value there says. Counted in Spark, they
took two more jobs and an expression per place, whose planning and compilation cost
about as much CPU as typing the production-like day's rows (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import parse
from sparkjobs.compaction.payload_plan import addressable, mixed_places
from sparkjobs.compaction.typed import is_object
from sparkjobs.table.evolve import Path
from sparkjobs.table.payload import NULL, Struct, Type, struct_paths
from sparkjobs.table.variant_schema import read_variant_schema, write_variant_schema

log = structlog.get_logger("sparkjobs.compact")


@dataclass(frozen=True)
class Sample:
    """What the sample showed (nothing when it could not be read)."""

    shape: str | None = None
    """``schema_of_variant_agg``'s text; None when no payload was an object."""
    kinds: dict[Path, dict[str, int]] = field(default_factory=dict)
    """At each place whose values had two kinds, how many had each (by the kind's
    ``schema_of_variant`` text as :func:`write_variant_schema` writes what it reads)."""
    absent: dict[Path, int] = field(default_factory=dict)
    """At each field's place, how many objects whose parent was set had it missing or
    null."""


def sample_shape(
    spark: SparkSession, uris: list[str], payload_format: str, declared: Struct | None = None
) -> Sample:
    """What the object payloads in ``uris`` (landed objects) show; the places counted
    for :attr:`Sample.absent` are the shape's and ``declared``'s. Nothing when they
    cannot be read (the run's own pass then finds the shape)."""
    if not uris or payload_format != "json":
        return Sample()
    try:  # an object gone since the listing fails the read itself
        lines = parse(spark.read.text(uris).select("value"), payload_format)
        variant = sf.try_parse_json(sf.col("data"))
        objects = (
            lines.filter(sf.col("data_problem").isNull())
            .select(sf.when(is_object(variant), variant).alias("v"))
            .filter(sf.col("v").isNotNull())
        )
        # Each shape with its count, and (the rollup's total) all of them joined.
        rows = (
            objects.select("v", sf.schema_of_variant("v").alias("s"))
            .rollup("s")
            .agg(
                sf.grouping("s").alias("total"),
                sf.count("*").alias("n"),
                sf.schema_of_variant_agg("v").alias("shape"),
            )
            .collect()
        )
        shape = next((row["shape"] for row in rows if row["total"]), None)
        if not (isinstance(shape, str) and shape.startswith("OBJECT<")):
            return Sample()
        shapes = [
            (read_variant_schema(row["s"]), int(row["n"])) for row in rows if not row["total"]
        ]
        seen = read_variant_schema(shape)
    except Exception as exc:  # a damaged object: the run's pass finds the shape instead
        log.warning("payload sample unread; the pass finds the shape", error=str(exc)[:300])
        return Sample()
    places = mixed_places(seen)
    paths = sorted({*struct_paths(seen), *struct_paths(declared or Struct(()))})
    return Sample(shape, kinds_of(shapes, places), absent_of(shapes, paths))


Shapes = list[tuple[Type, int]]
"""The sampled objects' shapes (``schema_of_variant`` read), each with how many had it."""


def _places_in(kind: Type, path: Path = ()) -> Iterator[tuple[Path, Type]]:
    """Each place in an object of shape ``kind`` with what ``schema_of_variant`` says of
    its value, through objects (not into arrays), where Spark's paths can address it."""
    if isinstance(kind, Struct):
        for f in kind.fields:
            if addressable(f.name):
                at = (*path, f.name)
                yield at, f.type
                yield from _places_in(f.type, at)


def kinds_of(shapes: Shapes, places: list[Path]) -> dict[Path, dict[str, int]]:
    """How many of the sampled values at each of ``places`` had each kind; nulls and
    left-out values not counted."""
    wanted = set(places)
    found: dict[Path, dict[str, int]] = {}
    if not wanted:
        return found
    for shape, count in shapes:
        for path, kind in _places_in(shape):
            if path in wanted and kind != NULL:
                each = found.setdefault(path, {})
                name = write_variant_schema(kind)
                each[name] = each.get(name, 0) + count
    return found


def absent_of(shapes: Shapes, paths: list[Path]) -> dict[Path, int]:
    """How many sampled objects whose parent was set left each of ``paths`` out or null:
    those with the parent set less those with the place set (a value is set only in a
    parent that is set)."""
    objects = sum(count for _, count in shapes)
    present: dict[Path, int] = {}
    for shape, count in shapes:
        for path, kind in _places_in(shape):
            if kind != NULL:
                present[path] = present.get(path, 0) + count
    return {
        path: (present.get(path[:-1], 0) if path[:-1] else objects) - present.get(path, 0)
        for path in paths
    }
