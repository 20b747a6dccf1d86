"""Where landed objects live: the archive layout, built and parsed.

    {prefix}/stream={stream}/dt=YYYY-MM-DD/hour=HH/minute=mm/shard={shard}/{first}-{last}.jsonl.gz

A bound is a position: ``sequence`` for subsequence 0, ``sequence.sub`` otherwise, so
runs cut inside a KPL aggregate still get distinct keys, and plain streams get the
plain ``{first_seq}-{last_seq}`` names. Dead letters mirror the layout under
``{prefix}/dead-letter/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from consumer.sequence import Position

SUFFIX = ".jsonl.gz"
DEAD_LETTER = "dead-letter"

_KEY = re.compile(
    r"(?:^|/)stream=(?P<stream>[^/]+)/dt=(?P<dt>\d{4}-\d{2}-\d{2})/hour=(?P<hour>\d{2})"
    r"/minute=(?P<minute>\d{2})/shard=(?P<shard>[^/]+)/"
    r"(?P<first>\d+(?:\.\d+)?)-(?P<last>\d+(?:\.\d+)?)\.jsonl\.gz$"
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


def minute_prefix(prefix: str, stream: str, shard_id: str, minute: datetime) -> str:
    """The folder holding one shard's objects of one minute (ends with '/')."""
    m = minute.astimezone(UTC)
    return (
        _join(
            prefix,
            f"stream={stream}",
            f"dt={m.year:04d}-{m.month:02d}-{m.day:02d}",
            f"hour={m:%H}",
            f"minute={m:%M}",
            f"shard={shard_id}",
        )
        + "/"
    )


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
    year, month, day = (int(part) for part in match["dt"].split("-"))
    minute = datetime(year, month, day, int(match["hour"]), int(match["minute"]), tzinfo=UTC)
    return LandedKey(
        match["stream"],
        match["shard"],
        minute,
        parse_bound(match["first"]),
        parse_bound(match["last"]),
    )
