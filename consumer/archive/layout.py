"""Where landed objects live: the archive layout, built and parsed.

    {prefix}/stream={stream}/dt=YYYY-MM-DD/hour=HH/minute=mm/shard={shard}/{first}-{last}{SUFFIX}

(:data:`.codec.SUFFIX` is the codec's).

A bound is a position: ``sequence`` for subsequence 0, ``sequence.sub`` otherwise, so
runs cut inside a KPL aggregate still get distinct keys, and plain streams get the
plain ``{first_seq}-{last_seq}`` names. Dead letters mirror the layout under
``{prefix}/dead-letter/``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from consumer.archive.codec import GLOB, SUFFIX, SUFFIX_PATTERN
from consumer.sequence import Position

__all__ = ["SUFFIX"]  # re-exported: a key's end is the codec's

DEAD_LETTER = "dead-letter"
TEMPLATE = (
    "{prefix}/stream={stream}/dt=YYYY-MM-DD/hour=HH/minute=mm/shard={shard}/{first}-{last}" + SUFFIX
)
"""The key layout, as the module's docstring draws it: part of the landing settings a
fleet's workers must share (:mod:`consumer.landing.fingerprint`), so a release that
names objects otherwise is noticed as landing differently."""
PARTITIONS = ("dt", "hour", "minute")
"""The key's partition folders below a stream's, outermost first."""
KEY_DEPTH = len(PARTITIONS) + 2
"""The parts of a key below its stream's folder: the partitions, ``shard=…`` and the
object's name."""

_KEY = re.compile(
    r"(?:^|/)stream=(?P<stream>[^/]+)/dt=(?P<dt>\d{4}-\d{2}-\d{2})/hour=(?P<hour>\d{2})"
    r"/minute=(?P<minute>\d{2})/shard=(?P<shard>[^/]+)/"
    r"(?P<first>\d+(?:\.\d+)?)-(?P<last>\d+(?:\.\d+)?)" + SUFFIX_PATTERN + "$"
)


def minute_of(arrival: datetime) -> datetime:
    """The UTC minute a record belongs to (its partition)."""
    return arrival.astimezone(UTC).replace(second=0, microsecond=0)


def bound(position: Position) -> str:
    """A position as it appears in a key."""
    if position.subsequence:
        return f"{position.sequence}.{position.subsequence}"
    return str(position.sequence)


def parse_bound(text: str) -> Position:
    """Inverse of :func:`bound`."""
    sequence, _, sub = text.partition(".")
    return Position(int(sequence), int(sub or 0))


def _join(*parts: str) -> str:
    return "/".join(part.strip("/") for part in parts if part.strip("/"))


def stream_folder(stream: str) -> str:
    """``stream=S``: the folder of one stream under the archive (and the outputs)."""
    return f"stream={stream}"


def hour_folder(hour: datetime) -> str:
    """``dt=D/hour=HH``: an hour's folder under the stream, in the archive and the output."""
    h = hour.astimezone(UTC)
    return f"dt={h.year:04d}-{h.month:02d}-{h.day:02d}/hour={h:%H}"


def minute_folder(minute: datetime) -> str:
    """``dt=D/hour=HH/minute=MM``."""
    return f"{hour_folder(minute)}/minute={minute.astimezone(UTC):%M}"


def day_glob(stream: str, day: date) -> str:
    """A glob of one day's landed objects of ``stream``, relative to the archive (for
    readers such as DuckDB that take a pattern)."""
    return f"{stream_folder(stream)}/dt={day.isoformat()}/hour=*/minute=*/shard=*/{GLOB}"


def hour_glob(hour: datetime) -> str:
    """A glob of one hour's landed objects, relative to the stream's folder."""
    return f"{hour_folder(hour)}/minute=*/shard=*/{GLOB}"


def minute_prefix(prefix: str, stream: str, shard_id: str, minute: datetime) -> str:
    """The folder holding one shard's objects of one minute (ends with '/')."""
    return _join(prefix, stream_folder(stream), minute_folder(minute), f"shard={shard_id}") + "/"


def object_key(
    prefix: str, stream: str, shard_id: str, minute: datetime, *, first: Position, last: Position
) -> str:
    """The key of the object holding one run."""
    return f"{minute_prefix(prefix, stream, shard_id, minute)}{bound(first)}-{bound(last)}{SUFFIX}"


def dead_letter_key(
    prefix: str, stream: str, shard_id: str, minute: datetime, *, first: Position, last: Position
) -> str:
    """The key of the dead letters of one run."""
    return object_key(_join(prefix, DEAD_LETTER), stream, shard_id, minute, first=first, last=last)


@dataclass(frozen=True, slots=True)
class LandedKey:
    """What a landed object's key says about it."""

    stream: str
    shard_id: str
    minute: datetime
    first: Position
    last: Position


def parse_key(key: str) -> LandedKey | None:
    """Read a key written by :func:`object_key`; None for anything else."""
    match = _KEY.search(key)
    if match is None:
        return None
    minute = _minute(match["dt"], match["hour"], match["minute"])
    return LandedKey(
        match["stream"],
        match["shard"],
        minute,
        parse_bound(match["first"]),
        parse_bound(match["last"]),
    )


_RELATIVE = re.compile(
    r"(?:^|/)(?P<rel>dt=(?P<dt>\d{4}-\d{2}-\d{2})/hour=(?P<hour>\d{2})/minute=(?P<minute>\d{2})"
    r"/shard=[^/]+/[^/]+" + SUFFIX_PATTERN + ")$"
)
_PARTITION = re.compile(r"(?:^|/)dt=(?P<dt>\d{4}-\d{2}-\d{2})/hour=(?P<hour>\d{2})(?:/|$)")


@dataclass(frozen=True, slots=True)
class RelativeKey:
    """A landed object's key below its stream's folder, and the minute it names."""

    rel: str
    """``dt=…/hour=…/minute=…/shard=…/name`` (the :data:`KEY_DEPTH` last parts)"""
    minute: datetime

    @property
    def hour(self) -> datetime:
        """The hour (partition) the object belongs to."""
        return self.minute.replace(minute=0)


def parse_relative(path: str) -> RelativeKey | None:
    """The relative key and minute of a landed object's path or URI (any prefix, any
    object name); None for anything that is not one."""
    match = _RELATIVE.search(path)
    if match is None:
        return None
    return RelativeKey(match["rel"], _minute(match["dt"], match["hour"], match["minute"]))


def hour_of(path: str) -> datetime | None:
    """The ``dt=…/hour=…`` partition a path lies in (a landed object or an output
    file), as a UTC hour; None if the path has none."""
    match = _PARTITION.search(path)
    return None if match is None else _minute(match["dt"], match["hour"], "00")


@functools.lru_cache(maxsize=4096)  # a listing's objects share their minutes
def _minute(dt: str, hour: str, minute: str) -> datetime:
    year, month, day = (int(part) for part in dt.split("-"))
    return datetime(year, month, day, int(hour), int(minute), tzinfo=UTC)
