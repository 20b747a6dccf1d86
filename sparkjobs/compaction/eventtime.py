"""The payload's event time as a column of the table, and the partitions it can give.

With ``LANDER_EVENT_TIME_POINTER`` the compaction writes ``event_ts``: the field the
pointer names, read from ``data`` by one rule that the analysis shares
(:func:`sparkjobs.compaction.lines.event_time`). With ``LANDER_COMPACT_PARTITION``
naming ``event_day`` the table is also (or only) partitioned by ``day(event_ts)``:

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

from sparkjobs.compaction.lines import event_time, pointer_path
from sparkjobs.table.table import EVENT_TS, by_event_day

if TYPE_CHECKING:
    from sparkjobs.compaction.job import CompactJob

EVENT_DAY = "event_day"
"""The Spark partition folder (``event_day=YYYY-MM-DD``) that keeps event days apart in
a run's output; the table's own partition is Iceberg's ``day(event_ts)``."""


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
