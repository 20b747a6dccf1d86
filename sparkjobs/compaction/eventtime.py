"""The payload's event time as a column of the table, and the partitions it can give.

With ``LANDER_EVENT_TIME_POINTER`` the compaction writes ``event_ts``: the field the
pointer names, read from ``data`` by one rule that the analysis shares
(:func:`event_time`). With ``LANDER_COMPACT_PARTITION`` naming ``event_day`` the table is
also (or only) partitioned by ``day(event_ts)``:

- ``arrival_hour`` (the default): ``hour(arrival_ts)``, as before;
- ``arrival_hour,event_day``: ``hour(arrival_ts)`` then ``day(event_ts)``: a late event
  lies in its arrival hour's files, in a file of its own event day, so a query by event
  day prunes to that day's files of every arrival hour;
- ``event_day``: ``day(event_ts)`` alone.

Either way a run still writes and replaces whole arrival hours: each file holds one
arrival hour and one event day (or only rows without an event time), so pyiceberg,
which derives a file's partition from its column statistics, files it correctly, and
the commit (:mod:`sparkjobs.table.table`) finds an hour's files by their ``arrival_ts``
bounds whatever the spec. Dedupe never looks at the event time: the rows a run keeps,
and incremental-equals-from-scratch, are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as sf

from sparkjobs.compaction.lines import json_path
from sparkjobs.table.table import EVENT_PARTITION, EVENT_TS, PARTITIONS

if TYPE_CHECKING:
    from sparkjobs.compaction.job import CompactJob

EVENT_DAY = "event_day"
"""The Spark partition folder (``event_day=YYYY-MM-DD``) that keeps event days apart in
a run's output; the table's own partition is Iceberg's ``day(event_ts)``."""

_FIRST_MICROS = -62_135_596_800_000_000
"""0001-01-01T00:00:00Z: an event time before it (or after :data:`_LAST_MICROS`) is no
event time (null), not a date Iceberg's day transform and Python cannot both show."""
_LAST_MICROS = 253_402_300_799_999_999
"""9999-12-31T23:59:59.999999Z."""
_EPOCH_BELOW = 1e21
"""An epoch number's magnitude below which its microseconds fit the product's decimal."""
_MS_ABOVE = 1e11
"""A bare number above this is epoch milliseconds (1e11 seconds is the year 5138)."""


def by_event_day(partition: str) -> bool:
    """Whether ``partition`` (a key of :data:`~sparkjobs.table.table.PARTITIONS`) splits
    files by event day."""
    return EVENT_PARTITION in PARTITIONS[partition]


def event_time(data: Column, pointer: str, notation: str | int | None = None) -> Column:
    """The payload's event time at ``pointer``: null when absent or unreadable.

    ``notation`` as a declared schema gives it: ``iso`` (ISO-8601 text only) or the units
    per second of an epoch number. Undeclared (None): ISO-8601 text, or an epoch number
    in seconds, or in milliseconds when above 1e11. Text without an offset is UTC.
    """
    raw = sf.get_json_object(data, json_path(pointer))
    iso = sf.try_to_timestamp(raw)
    if notation == "iso":
        return _bounded(iso)
    number = raw.try_cast("decimal(38,9)")
    if notation is None:
        per_second = sf.when(number > sf.lit(_MS_ABOVE), sf.lit(1000)).otherwise(sf.lit(1))
        value = sf.coalesce(iso, _epoch(number, per_second))
    else:
        value = _epoch(number, sf.lit(int(notation)))
    return _bounded(value)


def _epoch(number: Column, per_second: Column) -> Column:
    # Bounded before the product: under ANSI a decimal past its precision fails the
    # query instead of giving null (1e21 is past year 9999 in any unit up to 1e9 a second).
    fits = sf.abs(number) < sf.lit(_EPOCH_BELOW)
    micros = sf.when(fits, number * sf.lit(1_000_000) / per_second).try_cast("bigint")
    return sf.when(
        micros.between(sf.lit(_FIRST_MICROS), sf.lit(_LAST_MICROS)), sf.timestamp_micros(micros)
    )


def _bounded(value: Column) -> Column:
    micros = sf.unix_micros(value)
    return sf.when(micros.between(sf.lit(_FIRST_MICROS), sf.lit(_LAST_MICROS)), value)


def event_day(at: Column) -> Column:
    """The UTC day of an event time, as its folder names it (null stays null)."""
    return sf.date_format(at, "yyyy-MM-dd")


def columns(job: CompactJob, kept: Column) -> list[Column]:
    """The event-time columns a run adds to its ``kept`` rows (the dropped copies get
    none): ``event_ts`` with a pointer, and ``event_day``, the folder, by event day."""
    if job.event_time_pointer is None:
        return []
    at = sf.when(kept, event_time(sf.col("data"), job.event_time_pointer, notation(job)))
    found = [at.alias(EVENT_TS)]
    if by_event_day(job.partition):
        found.append(event_day(at).alias(EVENT_DAY))
    return found


def written(job: CompactJob) -> list[str]:
    """The event-time columns in a run's files."""
    return [] if job.event_time_pointer is None else [EVENT_TS]


def folders(job: CompactJob) -> list[str]:
    """The folders a run writes its files in: arrival day and hour, then the event day
    when the table is partitioned by it (a file never mixes two)."""
    return ["dt", "hour", *([EVENT_DAY] if by_event_day(job.partition) else [])]


def notation(job: CompactJob) -> str | int | None:
    """How the declared schema says the event time is written (None: not declared)."""
    if job.declared is None or job.event_time_pointer is None:
        return None
    return job.declared.timestamps.get(pointer_path(job.event_time_pointer))


def pointer_path(pointer: str) -> tuple[str, ...]:
    """A JSON pointer's field names (``/a/b~1c`` is ``("a", "b/c")``)."""
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/"))
