"""Planning a compaction from listings: which hours are stale, which objects are read.

Pure: the filesystem is only listed (:class:`~sparkjobs.io.Filesystem`), what is
published comes in as entries, and nothing here imports pyspark, so every decision is
tested without a JVM (tests/sparkjobs/test_compact_plan.py).

- An hour's result depends on its own objects and on those of the dedupe horizon
  before it (:func:`inputs_of`; the rule is :mod:`sparkjobs.compaction.dedupe`'s), so the hours
  listed are the window's and those its horizon reaches into (:func:`listed_hours`).
- An hour is *stale* when the digest of those inputs is not the published one
  (:func:`sparkjobs.table.publish.stale_hours`); only stale hours are read and rewritten.
- A run reads the folders of its stale hours and those of the horizon before them
  (:attr:`WindowPlan.folders`): whole hour folders where the horizon covers the hour,
  minute folders where it covers part of one.
- A horizon hour that is not rewritten and whose published entry was made from the
  objects it holds now is read through its *index* instead (:attr:`WindowPlan.indexed`):
  the hour's published rows and its dropped copies, which together are every line of
  its objects (:attr:`~sparkjobs.table.publish.HourEntry.own_digest`). Only what dedupe
  compares is read from them, in Parquet, instead of every landed object again.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from consumer.archive.layout import RelativeKey, hour_folder, minute_folder, parse_relative
from sparkjobs.compaction.job import CompactJob
from sparkjobs.io import Filesystem, Listed, join
from sparkjobs.table.publish import (
    HourEntry,
    InputFile,
    digest_text,
    input_order,
    inputs_digest,
    stale_hours,
)
from sparkjobs.window import Window, hour_label, parse_hour


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """What one run reads and rewrites, decided from a listing and what is published."""

    inputs: dict[str, list[InputFile]]
    """Every hour of the window: the objects its result depends on (horizon included)."""
    digests: dict[str, str]
    """Every hour of the window: the digest of its inputs now."""
    stale: list[str]
    """The hours to rewrite, in order."""
    own: dict[str, list[InputFile]]
    """Each stale hour's own objects (its horizon's not counted)."""
    read: dict[str, InputFile]
    """Every object the run reads, by key relative to the stream's folder."""
    folders: list[str]
    """The folders the run reads: stale hours' folders, and the lookback's (hour folders
    the horizon covers whole, minute folders of the hour it starts in)."""
    indexed: dict[str, HourEntry]
    """Horizon hours read through their index (their published entry), not their objects."""

    @property
    def unchanged(self) -> list[str]:
        """The hours of the window whose published entry stays."""
        return sorted(set(self.inputs) - set(self.stale))

    @property
    def lookback_files(self) -> int:
        """Objects read only for the horizon of a stale hour (not one's own)."""
        own = {f.rel for files in self.own.values() for f in files}
        return len(set(self.read) - own)


def listed_hours(window: Window, minutes: int) -> list[datetime]:
    """The hours to list: the window's, and those its horizon (minutes) reaches into."""
    first = window.start - timedelta(minutes=minutes)
    hour = first.replace(minute=0)
    hours = []
    while hour < window.end:
        hours.append(hour)
        hour += timedelta(hours=1)
    return hours


def list_inputs(
    fs: Filesystem, job: CompactJob, known: Mapping[datetime, list[InputFile]] | None = None
) -> dict[datetime, list[InputFile]]:
    """Landed objects by hour, for the window's hours and the hours its horizon reaches.

    An object counts in the hour its key names; anything else in the folder (a
    marker, an object of another hour) is left out. ``known``: hours this run listed
    already (for the window before this one); its horizon hours are taken from there,
    the window's own hours are always listed.
    """
    own = set(job.window.hour_starts())
    return {
        hour: known[hour]
        if known is not None and hour in known and hour not in own
        else sorted(
            (InputFile(rel, i.size, i.modified_ms) for rel, i in _landed_in(fs, job, hour)),
            key=input_order,
        )
        for hour in listed_hours(job.window, job.horizon_minutes)
    }


ByHour = dict[datetime, list[InputFile]]
"""A listing: landed objects by hour (:func:`list_inputs`)."""


def list_window(
    fs: Filesystem, job: CompactJob, known: dict[str, ByHour]
) -> tuple[datetime, ByHour]:
    """When the window was listed, and its listing, horizon hours taken from ``known``
    (a run's listings so far, by source), to which its hours are added."""
    listed_at = datetime.now(UTC)
    seen = known.setdefault(job.source, {})
    by_hour = list_inputs(fs, job, seen)
    seen.update(by_hour)
    return listed_at, by_hour


def has_landed_input(fs: Filesystem, job: CompactJob) -> bool:
    """Whether any hour of the window itself holds a landed object (horizon not counted).

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
    """The objects an hour's result depends on: its own and those of the ``minutes``
    before it (the dedupe horizon)."""
    found = set(by_hour.get(hour, ()))
    for start, since in _horizon(hour, by_hour, minutes):
        found.update(_from(by_hour[start], since))
    return sorted(found, key=input_order)


def _horizon(
    hour: datetime, starts: Iterable[datetime], minutes: int
) -> Iterator[tuple[datetime, datetime | None]]:
    """The hours of ``starts`` the horizon of ``hour`` reaches, in their order, each
    with the minute the horizon starts at if it covers only part of it (else None)."""
    since = hour - timedelta(minutes=minutes)
    for start in starts:
        if start < hour and start + timedelta(hours=1) > since:
            yield start, None if start >= since else since


def _from(files: list[InputFile], since: datetime | None) -> list[InputFile]:
    """``files`` landed in minute ``since`` or later (all of them when None)."""
    return files if since is None else [f for f in files if since <= _relative(f.rel).minute]


def plan_window(
    job: CompactJob,
    by_hour: Mapping[datetime, list[InputFile]],
    current: Mapping[str, HourEntry],
    unindexed: frozenset[str] = frozenset(),
) -> WindowPlan:
    """The run's plan from the listing (:func:`list_inputs`) and the published entries
    (the window's hours and those of the horizon before it). ``unindexed``: hours whose
    index turned out incomplete (files missing), read from their objects."""
    starts = job.window.hour_starts()
    own_digest = _OwnDigests(by_hour)
    inputs, digests = _inputs_and_digests(starts, by_hour, job.horizon_minutes, own_digest)
    stale = stale_hours(current, digests)
    stale_starts = [h for h in starts if hour_label(h) in stale]
    indexed = {
        label: entry
        for hour in sorted(_covered_hours(stale_starts, job.horizon_minutes, partly=True))
        if (label := hour_label(hour)) not in stale
        and label not in unindexed
        and by_hour.get(hour)
        and (entry := current.get(label)) is not None
        and entry.indexed
        and entry.own_digest == own_digest(hour)
    }
    read: dict[str, InputFile] = {}
    # Each object's hour from the listing's own grouping: parsing every key again, for
    # every stale hour whose horizon holds it, was ~200k parses for a day.
    indexed_rels = {f.rel for label in indexed for f in by_hour[parse_hour(label)]}
    for start in stale_starts:
        read.update((f.rel, f) for f in inputs[hour_label(start)] if f.rel not in indexed_rels)
    own = {hour: list(by_hour.get(parse_hour(hour), [])) for hour in stale}
    own_rels = {f.rel for files in own.values() for f in files}
    covered = _covered_hours(stale_starts, job.horizon_minutes)
    folders = sorted(
        {join(job.source, hour_folder(h)) for h in stale_starts if by_hour.get(h)}
        | {join(job.source, _folder_of(rel, covered)) for rel in read if rel not in own_rels}
    )
    return WindowPlan(inputs, digests, stale, own, read, folders, indexed)


class _OwnDigests:
    """Each listed hour's own objects' digest text, made once; :func:`inputs_digest`'s
    digest of any run of whole hours, and of an hour alone, from them.

    Only when the listing is in key order across its hours (each key once; true of any
    listing :func:`list_inputs` made, since an hour's keys begin with its ``dt=``/``hour=``
    folders): then an hour's inputs in key order are its horizon's hours' objects
    followed by its own, and the digest's sorted text is their texts one after another.
    ``in_order`` is False otherwise, and callers take the general way.
    """

    def __init__(self, by_hour: Mapping[datetime, list[InputFile]]) -> None:
        self.hours = sorted(h for h, files in by_hour.items() if files)
        self.by_hour = by_hour
        keys = [f.rel for h in self.hours for f in by_hour[h]]
        self.in_order = all(a < b for a, b in itertools.pairwise(keys))
        self._text: dict[datetime, bytes] = {}

    def text(self, hour: datetime) -> bytes:
        """The digest's text of ``hour``'s own objects (in order)."""
        found = self._text.get(hour)
        if found is None:
            found = self._text[hour] = digest_text(self.by_hour.get(hour, ()))
        return found

    def __call__(self, hour: datetime) -> str:
        """:func:`inputs_digest` of ``hour``'s own objects."""
        if not self.in_order:
            return inputs_digest(self.by_hour.get(hour, ()))
        return hashlib.sha256(self.text(hour)).hexdigest()


def _inputs_and_digests(
    starts: list[datetime],
    by_hour: Mapping[datetime, list[InputFile]],
    minutes: int,
    own: _OwnDigests,
) -> tuple[dict[str, list[InputFile]], dict[str, str]]:
    """:func:`inputs_of` and :func:`inputs_digest` of it for every hour of ``starts``,
    by label.

    A day against a 24 h horizon holds each object in 25 hours' inputs: set, sort and
    digest each hour's ~9,000 inputs anew was about a CPU-second a day. A listing in key
    order (:class:`_OwnDigests`) joins the hours' lists and digests their texts instead
    (equal results: tests/sparkjobs/test_compact_plan.py).
    """
    if not own.in_order:
        each = {hour_label(h): inputs_of(h, by_hour, minutes) for h in starts}
        return each, {label: inputs_digest(files) for label, files in each.items()}
    inputs: dict[str, list[InputFile]] = {}
    digests: dict[str, str] = {}
    for hour in starts:
        files: list[InputFile] = []
        digest = hashlib.sha256()
        for start, since in _horizon(hour, own.hours, minutes):
            part = _from(by_hour[start], since)
            files += part
            digest.update(own.text(start) if since is None else digest_text(part))
        files += by_hour.get(hour, ())
        digest.update(own.text(hour))
        inputs[hour_label(hour)] = files
        digests[hour_label(hour)] = digest.hexdigest()
    return inputs, digests


def _covered_hours(stale: list[datetime], minutes: int, *, partly: bool = False) -> set[datetime]:
    """Hours the horizon of some stale hour covers whole (read as one folder), or, with
    ``partly``, at least in part."""
    covered: set[datetime] = set()
    for start in stale:
        first = start - timedelta(minutes=minutes)
        hour = first.replace(minute=0)
        if first.minute and not partly:
            hour += timedelta(hours=1)
        while hour < start:
            covered.add(hour)
            hour += timedelta(hours=1)
    return covered


def _folder_of(rel: str, covered: set[datetime]) -> str:
    """The folder a horizon object is read through: its hour's when covered whole."""
    where = _relative(rel)
    return hour_folder(where.hour) if where.hour in covered else minute_folder(where.minute)


def partitions_for(parallelism: int, sizes: Mapping[str, int], target_bytes: int) -> int:
    """Partitions of the dedupe: at least one per core (``parallelism``), and as many
    as the biggest hour has target-sized files (:func:`files_per_hour`)."""
    return max(parallelism, *files_per_hour(sizes, target_bytes).values(), 1)


def files_per_hour(sizes: Mapping[str, int], target_bytes: int) -> dict[str, int]:
    """How many Parquet files each hour is written as: one, or as many as it takes to
    keep each near ``target_bytes`` (``sizes``: input bytes by hour; Parquet of these
    rows is about the size of the level-1 gzip it came from)."""
    return {hour: max(1, math.ceil(size / target_bytes)) for hour, size in sizes.items()}


def hour_label_of(rel: str) -> str:
    """The hour (``YYYY-MM-DDTHH``) a landed object's relative key belongs to."""
    return hour_label(_relative(rel).hour)


@functools.lru_cache(maxsize=1 << 16)
def _relative(rel: str) -> RelativeKey:
    where = parse_relative(rel)
    if where is None:
        raise ValueError(f"not a landed object's key: {rel}")
    return where
