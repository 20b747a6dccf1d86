"""What a run learns of its window's payloads before it writes (issue 48): a sample.

A few of the window's objects (:func:`sparkjobs.compaction.payload_plan.sample_keys`)
are read and parsed once into variants; :func:`sample_shape` gives:

- their object payloads' shape (``schema_of_variant_agg``), whose new fields the run
  adds as columns;
- at each place whose values had two kinds, how many had each (the commoner kind makes
  the column, :func:`sparkjobs.compaction.payload_plan.dominant`);
- at each field's place (through objects, not into arrays), how many objects whose
  parent was set left it out or null: a place none left out may be a required column
  when the run creates the ``payload`` column
  (:func:`sparkjobs.compaction.payload_plan.created_required`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import parse
from sparkjobs.compaction.payload_plan import mixed_places
from sparkjobs.compaction.typed import is_object, value_at
from sparkjobs.table.evolve import Path
from sparkjobs.table.payload import Struct, struct_paths
from sparkjobs.table.variant_schema import read_variant_schema

log = structlog.get_logger("sparkjobs.compact")


@dataclass(frozen=True)
class Sample:
    """What the sample showed (nothing when it could not be read)."""

    shape: str | None = None
    """``schema_of_variant_agg``'s text; None when no payload was an object."""
    kinds: dict[Path, dict[str, int]] = field(default_factory=dict)
    """At each place whose values had two kinds, how many had each."""
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
    objects: DataFrame | None = None
    try:  # an object gone since the listing fails the read itself
        lines = parse(spark.read.text(uris).select("value"), payload_format)
        variant = sf.try_parse_json(sf.col("data"))
        # Kept for the counts: the objects are read and parsed once.
        objects = (
            lines.filter(sf.col("data_problem").isNull())
            .select(sf.when(is_object(variant), variant).alias("v"))
            .filter(sf.col("v").isNotNull())
            .persist()
        )
        row = objects.agg(sf.schema_of_variant_agg("v").alias("shape")).first()
        shape = None if row is None else row["shape"]
        if not (isinstance(shape, str) and shape.startswith("OBJECT<")):
            return Sample()
        seen = read_variant_schema(shape)
        places = mixed_places(seen)
        paths = sorted({*struct_paths(seen), *struct_paths(declared or Struct(()))})
        return Sample(
            shape,
            _kinds(objects, places) if places else {},
            _absent(objects, paths) if paths else {},
        )
    except Exception as exc:  # a damaged object: the run's pass finds the shape instead
        log.warning("payload sample unread; the pass finds the shape", error=str(exc)[:300])
        return Sample()
    finally:
        if objects is not None:
            objects.unpersist()


def _kinds(objects: DataFrame, places: list[Path]) -> dict[Path, dict[str, int]]:
    """How many of the sampled values at each place had each kind."""
    picked = []
    for i, path in enumerate(places):
        sub = value_at(sf.col("v"), path)
        picked.append(sf.struct(sf.lit(i).alias("i"), sf.schema_of_variant(sub).alias("k")))
    rows = (
        objects.select(sf.explode(sf.array(*picked)).alias("x"))
        .filter(sf.col("x.k").isNotNull() & (sf.col("x.k") != "VOID"))
        .groupBy("x.i", "x.k")
        .count()
        .collect()
    )
    found: dict[Path, dict[str, int]] = {}
    for row in rows:
        found.setdefault(places[int(row["i"])], {})[str(row["k"])] = int(row["count"])
    return found


def _set(value: Column) -> Column:
    """Whether a variant value is there and not JSON's null."""
    return value.isNotNull() & ~sf.is_variant_null(value)


def _absent(objects: DataFrame, paths: list[Path]) -> dict[Path, int]:
    """How many sampled objects whose parent was set left each place out or null."""
    v = sf.col("v")
    counts = [
        sf.count_if(
            _set(value_at(v, path[:-1]) if path[:-1] else v) & ~_set(value_at(v, path))
        ).alias(f"a{i}")
        for i, path in enumerate(paths)
    ]
    row = objects.agg(*counts).first()
    if row is None:
        return {}
    return {path: int(row[f"a{i}"] or 0) for i, path in enumerate(paths)}
