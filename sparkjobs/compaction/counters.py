"""The compaction's counts by hour and cause, gathered while its plan runs.

A run counts, per hour it rewrites, the malformed lines (before the shuffle) and the
rows of each fate (kept, transport, producer, sequence; while the write runs), with
Spark observations: no second pass over the data. Two ways to count:

- with the reader jar (:mod:`sparkjobs.compaction.objectreader`), one aggregate,
  ``LandedObjectLines$Counts``, adds one to the field of a row's code (hour slot and
  cause in one small number): the same work per row however many hours;
- without it, a ``count(CASE WHEN code = k THEN 1 END)`` per hour and cause, which Spark
  evaluates on every row: about 100 of them for a day, which a profile of a warm day
  put at a tenth of its Java time.

Both give the same numbers (tests/sparkjobs/test_counters.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError
from pyspark.sql import functions as sf

from sparkjobs.compaction.objectreader import CLASS

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

COUNTS_CLASS = f"{CLASS}$Counts"
COUNTS = "lander_code_counts"
"""code (int, null: not counted) -> the number of rows of each code, 0 to CODES - 1."""
CODES = 128
"""The codes one aggregate counts (the Java class's ``CODES``)."""

KEPT, TRANSPORT, PRODUCER, MALFORMED, SEQUENCE = range(5)
CAUSES = 5
_NAMED = ((KEPT, "kept"), (TRANSPORT, "transport"), (PRODUCER, "producer"))
_ALL = "codes"


def enable(spark: SparkSession) -> bool:
    """Register :data:`COUNTS` if the session can load its class; whether it is."""
    return register_aggregate(spark, COUNTS_CLASS, COUNTS)


def register_aggregate(spark: SparkSession, java_class: str, name: str) -> bool:
    """Register the ``Aggregator`` ``java_class`` under ``name`` if the session can load
    it; whether it is.

    The class registers itself (``register``, called through py4j): PySpark registers
    only the older kind of aggregate by name, which an observation cannot send back
    (its generated input projection does not serialize). A class py4j cannot load comes
    back as a package, not a class.
    """
    found: Any = spark.sparkContext._jvm
    try:
        for part in java_class.split("."):
            found = getattr(found, part)
        if not isinstance(found, JavaClass):
            return False
        found.register(spark._jsparkSession, name)
    except Py4JError:
        return False
    return True


def _named(sequence: bool) -> tuple[tuple[int, str], ...]:
    # Without a sequence pointer no row is a sequence duplicate: no counter for it.
    return (*_NAMED, (SEQUENCE, "sequence")) if sequence else _NAMED


def _one_aggregate(fast: bool, codes: int) -> bool:
    return fast and codes <= CODES


def malformed_counters(hours: Sequence[str], *, fast: bool) -> list[Column]:
    """Aggregates of the ``malformed`` column (the line's hour slot, null if sound)."""
    if _one_aggregate(fast, len(hours)):
        return [sf.call_function(COUNTS, sf.col("malformed")).alias(_ALL)]
    return [
        sf.expr(f"count(CASE WHEN malformed = {i} THEN 1 END)").alias(hour)
        for i, hour in enumerate(hours)
    ]


def malformed_counts(
    observed: Mapping[str, Any], hours: Sequence[str], *, fast: bool
) -> dict[str, int]:
    """Malformed lines per hour, from what :func:`malformed_counters` observed."""
    if _one_aggregate(fast, len(hours)):
        codes = _codes(observed)
        return {hour: codes[i] for i, hour in enumerate(hours)}
    return {hour: int(observed[hour]) for hour in hours}


def cause_counters(hours: Sequence[str], *, fast: bool, sequence: bool) -> list[Column]:
    """Aggregates of the ``code`` column (``slot * CAUSES + cause``, null: no hour)."""
    if _one_aggregate(fast, len(hours) * CAUSES):
        return [sf.call_function(COUNTS, sf.col("code")).alias(_ALL)]
    # Each counter one SQL expression: one call into the JVM to build, not seven.
    return [
        sf.expr(f"count(CASE WHEN code = {i * CAUSES + cause} THEN 1 END)").alias(f"{name}|{hour}")
        for i, hour in enumerate(hours)
        for cause, name in _named(sequence)
    ]


def cause_counts(
    observed: Mapping[str, Any], hours: Sequence[str], *, fast: bool, sequence: bool
) -> dict[str, int]:
    """``{cause}|{hour}`` -> rows, from what :func:`cause_counters` observed."""
    if not _one_aggregate(fast, len(hours) * CAUSES):
        return {name: int(value) for name, value in observed.items()}
    codes = _codes(observed)
    return {
        f"{name}|{hour}": codes[i * CAUSES + cause]
        for i, hour in enumerate(hours)
        for cause, name in _named(sequence)
    }


def _codes(observed: Mapping[str, Any]) -> list[int]:
    """The aggregate's counts (decimal text, comma-separated); all zero for no rows."""
    text = observed.get(_ALL)
    return [int(n) for n in text.split(",")] if text else [0] * CODES
