"""Planning a compaction from listings: which hours are stale, which objects are read.

Pure: the filesystem is only listed (:class:`~sparkjobs.io.Filesystem`), what is
published comes in as entries, and nothing here imports pyspark, so every decision is
tested without a JVM (tests/sparkjobs/test_compact_plan.py).

- An hour's result depends on its own objects and on those of the ``lookback_minutes``
  before it (:func:`inputs_of`), so the hours listed are the window's and those its
  lookback reaches into (:func:`listed_hours`).
- An hour is *stale* when the digest of those inputs is not the published one
  (:func:`sparkjobs.publish.stale_hours`); only stale hours are read and rewritten.
- A run reads the folders of its stale hours and the lookback minute folders of the
  objects it needs from other hours (:attr:`WindowPlan.folders`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from consumer.archive.layout import RelativeKey, hour_folder, minute_folder, parse_relative
from sparkjobs.io import Filesystem, Listed, join
from sparkjobs.job import CompactJob
from sparkjobs.publish import HourEntry, InputFile, inputs_digest, stale_hours
from sparkjobs.window import Window, hour_label, lookback, parse_hour


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """What one run reads and rewrites, decided from a listing and what is published."""

    inputs: dict[str, list[InputFile]]
    """Every hour of the window: the objects its result depends on (lookback included)."""
    digests: dict[str, str]
    """Every hour of the window: the digest of its inputs now."""
    stale: list[str]
    """The hours to rewrite, in order."""
    own: dict[str, list[InputFile]]
    """Each stale hour's own objects (its lookback's not counted)."""
    read: dict[str, InputFile]
    """Every object the run reads, by key relative to the stream's folder."""
    folders: list[str]
    """The folders the run reads: stale hours' folders, lookback minute folders."""

    @property
    def unchanged(self) -> list[str]:
        """The hours of the window whose published entry stays."""
        return sorted(set(self.inputs) - set(self.stale))

    @property
    def lookback_files(self) -> int:
        """Objects read only for the lookback of a stale hour (not one's own)."""
        own = {f.rel for files in self.own.values() for f in files}
        return len(set(self.read) - own)


def listed_hours(window: Window, minutes: int) -> list[datetime]:
    """The hours to list: the window's, and those its lookback minutes reach into."""
    hours = set(window.hour_starts())
    if minutes:
        hours |= {m.replace(minute=0) for h in list(hours) for m in lookback(h, minutes)}
    return sorted(hours)


def list_inputs(fs: Filesystem, job: CompactJob) -> dict[datetime, list[InputFile]]:
    """Landed objects by hour, for the window's hours and the hours its lookback reaches.

    An object counts in the hour its key names; anything else in the folder (a
    marker, an object of another hour) is left out.
    """
    return {
        hour: sorted(
            InputFile(rel, item.size, item.modified_ms) for rel, item in _landed_in(fs, job, hour)
        )
        for hour in listed_hours(job.window, job.lookback_minutes)
    }


def has_landed_input(fs: Filesystem, job: CompactJob) -> bool:
    """Whether any hour of the window itself holds a landed object (lookback not counted).

    Lists hour by hour and stops at the first object, so a busy window costs one listing;
    ``lander compact`` asks before it starts Spark when the archive is local.
    """
    return any(next(_landed_in(fs, job, hour), None) for hour in job.window.hour_starts())


def _landed_in(fs: Filesystem, job: CompactJob, hour: datetime) -> Iterator[tuple[str, Listed]]:
    """The landed objects whose key names ``hour`` (relative key, listing), lazily."""
    for item in fs.list_files(join(job.source, hour_folder(hour))):
        where = parse_relative(item.uri)
        if where is not None and where.hour == hour:
            yield where.rel, item


def inputs_of(
    hour: datetime, by_hour: Mapping[datetime, list[InputFile]], minutes: int
) -> list[InputFile]:
    """The objects an hour's result depends on: its own and its lookback minutes'."""
    own = list(by_hour.get(hour, []))
    wanted = {minute_folder(m) for m in lookback(hour, minutes)}
    for files in by_hour.values():
        own.extend(f for f in files if minute_folder_of(f.rel) in wanted)
    return sorted(set(own))


def plan_window(
    job: CompactJob,
    by_hour: Mapping[datetime, list[InputFile]],
    current: Mapping[str, HourEntry],
) -> WindowPlan:
    """The run's plan from the listing (:func:`list_inputs`) and the published entries."""
    starts = job.window.hour_starts()
    inputs = {hour_label(h): inputs_of(h, by_hour, job.lookback_minutes) for h in starts}
    digests = {hour: inputs_digest(files) for hour, files in inputs.items()}
    stale = stale_hours(current, digests)
    stale_starts = [h for h in starts if hour_label(h) in stale]
    read: dict[str, InputFile] = {}
    for start in stale_starts:
        read.update((f.rel, f) for f in inputs[hour_label(start)])
    own = {hour: list(by_hour.get(parse_hour(hour), [])) for hour in stale}
    own_rels = {f.rel for files in own.values() for f in files}
    folders = sorted(
        {join(job.source, hour_folder(h)) for h in stale_starts if by_hour.get(h)}
        | {join(job.source, minute_folder_of(rel)) for rel in read if rel not in own_rels}
    )
    return WindowPlan(inputs, digests, stale, own, read, folders)


def partitions_for(parallelism: int, sizes: Mapping[str, int], target_bytes: int) -> int:
    """Partitions of the dedupe, which is also the number of files each hour gets.

    Enough for the biggest hour (``sizes``: input bytes by hour) to come out near the
    target size (Parquet of these rows is about the size of the level-1 gzip it came
    from), and at least one per core (``parallelism``).
    """
    biggest = max(sizes.values(), default=0)
    return max(parallelism, math.ceil(biggest / target_bytes), 1)


def minute_folder_of(rel: str) -> str:
    """``dt=…/hour=…/minute=…`` of a landed object's relative key."""
    return minute_folder(_relative(rel).minute)


def hour_label_of(rel: str) -> str:
    """The hour (``YYYY-MM-DDTHH``) a landed object's relative key belongs to."""
    return hour_label(_relative(rel).hour)


def _relative(rel: str) -> RelativeKey:
    where = parse_relative(rel)
    if where is None:
        raise ValueError(f"not a landed object's key: {rel}")
    return where
