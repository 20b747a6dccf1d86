"""Many streams in one lease table: stream identities, lease keys, and which streams to
consume.

A fleet that consumes several streams keys each lease with its stream
(:mod:`consumer.leases.keys`).

``LANDER_STREAMS`` names the streams: names, ARNs, or shell-style patterns (``orders-*``)
matched against ListStreams. :func:`plan_streams` decides, from each listing, which
streams to start and which to retire: a stream that stopped matching (deleted, or no
longer named) is retired only after it has been missing for a grace period, so one
listing that misses a stream (an eventually consistent ListStreams) retires nothing.
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from consumer.leases.keys import ARN, StreamId

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_PATTERN = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]{1,128}$")


@dataclass(frozen=True, slots=True)
class Listed:
    """A stream as ListStreams shows it."""

    arn: str
    created: datetime

    @property
    def id(self) -> StreamId:
        return StreamId.of(self.arn, self.created)


@dataclass(frozen=True, slots=True)
class StreamChoice:
    """``LANDER_STREAMS``: the streams a fleet consumes."""

    names: frozenset[str] = frozenset()
    arns: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> StreamChoice:
        """Comma-separated names, ARNs and patterns (``*``, ``?``, ``[...]``); ValueError
        names the item that is none of them."""
        names: set[str] = set()
        arns: set[str] = set()
        patterns: list[str] = []
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            if item.startswith("arn:"):
                if not ARN.match(item):
                    raise ValueError(f"{item!r} is not a Kinesis stream ARN")
                arns.add(item)
            elif _NAME.match(item):
                names.add(item)
            elif _PATTERN.match(item):
                patterns.append(item)
            else:
                raise ValueError(
                    f"{item!r} is no stream name (A-Z a-z 0-9 _ . -), ARN or pattern (* ? [])"
                )
        if not (names or arns or patterns):
            raise ValueError("names no stream")
        return cls(frozenset(names), frozenset(arns), tuple(patterns))

    def matches(self, stream: Listed) -> bool:
        name = stream.id.name
        return (
            stream.arn in self.arns
            or name in self.names
            or any(fnmatchcase(name, pattern) for pattern in self.patterns)
        )

    def may_match(self, name: str) -> bool:
        """Whether a stream of this name could match (before its ARN is known)."""
        return (
            name in self.names
            or any(arn.rpartition("/")[2] == name for arn in self.arns)
            or any(fnmatchcase(name, pattern) for pattern in self.patterns)
        )

    def absent(self, listed: Iterable[Listed]) -> list[str]:
        """Names and ARNs given explicitly that the listing does not hold (sorted)."""
        found = list(listed)
        names = {s.id.name for s in found}
        arns = {s.arn for s in found}
        return sorted((self.names - names) | (self.arns - arns))


@dataclass(frozen=True, slots=True)
class StreamsPlan:
    """What to do after one listing."""

    start: list[StreamId]
    """Streams that match and are not consumed yet."""
    retire: list[StreamId]
    """Consumed streams missing from the listing for longer than the grace period."""
    missing_since: dict[StreamId, float]
    """Consumed streams missing from the listing, since when (carried to the next plan)."""


def plan_streams(
    consumed: Iterable[StreamId],
    listed: Iterable[Listed],
    choice: StreamChoice,
    *,
    now: float,
    missing_since: Mapping[StreamId, float],
    grace_seconds: float,
) -> StreamsPlan:
    """Start what matches and is new; retire what has not matched for ``grace_seconds``.

    A stream created again under the same name is a new stream (its creation time
    differs): the old one is retired once its grace has passed, the new one started.
    """
    wanted = {stream.id for stream in listed if choice.matches(stream)}
    current = set(consumed)
    missing = {stream: missing_since.get(stream, now) for stream in sorted(current - wanted)}
    retire = sorted(s for s, since in missing.items() if now - since >= grace_seconds)
    for stream in retire:
        del missing[stream]
    return StreamsPlan(sorted(wanted - current), retire, missing)
