"""Compaction windows: a day or an hour of arrival time, and where their inputs live.

The archive is partitioned by arrival minute, so a window's input is whole folders:
``stream=S/dt=D/hour=H/`` for each hour of the window, plus the folders of the dedupe
horizon before it (the *lookback*), read only so that a producer retry which crosses
the window's start is recognised as a duplicate of a copy before it
(:mod:`sparkjobs.compaction.dedupe`). Also the durations the settings take
(:func:`horizon_minutes`, :func:`duration_minutes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

from consumer.config import ConfigError

HOUR = timedelta(hours=1)
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_HOUR = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2})$")


class WindowError(ConfigError, ValueError):
    """A window that is not ``YYYY-MM-DD`` or ``YYYY-MM-DDTHH``, or a list of them that
    names one twice or overlaps: ``LANDER_WINDOW`` is bad (exit 2). Still a ValueError,
    as settings validators and callers of :meth:`Window.parse` take it."""

    retriable = False


@dataclass(frozen=True, slots=True)
class Window:
    """A day or an hour of arrival time (UTC)."""

    start: datetime
    hours: int

    @classmethod
    def parse(cls, text: str) -> Window:
        """``2026-11-22`` is a day, ``2026-11-22T13`` an hour."""
        text = text.strip()
        try:
            if match := _DAY.match(text):
                year, month, day = (int(g) for g in match.groups())
                return cls(datetime(year, month, day, tzinfo=UTC), 24)
            if match := _HOUR.match(text):
                year, month, day, hour = (int(g) for g in match.groups())
                return cls(datetime(year, month, day, hour, tzinfo=UTC), 1)
        except ValueError as exc:
            raise WindowError(f"window {text!r}: {exc}") from None
        raise WindowError(f"window {text!r}: expected a day YYYY-MM-DD or an hour YYYY-MM-DDTHH")

    @property
    def day(self) -> date:
        """The day the window lies in."""
        return self.start.date()

    @property
    def label(self) -> str:
        """The window as it was written."""
        return hour_label(self.start) if self.hours == 1 else self.start.strftime("%Y-%m-%d")

    @property
    def end(self) -> datetime:
        """The first instant after the window."""
        return self.start + HOUR * self.hours

    def hour_starts(self) -> list[datetime]:
        """The window's hours, in order."""
        return [self.start + HOUR * i for i in range(self.hours)]


def parse_windows(text: str) -> list[Window]:
    """``LANDER_WINDOW``: one window, or several separated by commas, in time order.

    ``A..B`` stands for every day (or every hour) from ``A`` to ``B``, both included:
    ``2026-11-01..2026-11-07`` is seven day windows. A window given twice, or an hour
    inside a day also given, is refused: each would be compacted twice.
    """
    found: list[Window] = []
    for given in text.split(","):
        item = given.strip()
        if not item:
            raise WindowError(f"window list {text!r}: an empty item")
        first, dots, last = item.partition("..")
        found.extend(
            _range(Window.parse(first), Window.parse(last)) if dots else [Window.parse(item)]
        )
    found.sort(key=lambda w: (w.start, -w.hours))
    for before, after in pairwise(found):
        if after.start < before.end:
            what = "given twice" if before == after else f"overlaps {before.label}"
            raise WindowError(f"window {after.label}: {what}")
    return found


def _range(first: Window, last: Window) -> list[Window]:
    """Every window of ``first``'s kind from ``first`` to ``last``, both included."""
    if first.hours != last.hours:
        raise WindowError(
            f"window range {first.label}..{last.label}: both ends must be days or both hours"
        )
    if last.start < first.start:
        raise WindowError(f"window range {first.label}..{last.label}: ends before it starts")
    step = HOUR * first.hours
    count = (last.start - first.start) // step + 1
    return [Window(first.start + step * i, first.hours) for i in range(count)]


def hour_label(hour: datetime) -> str:
    """``YYYY-MM-DDTHH``: how an hour is named in manifests."""
    return hour.astimezone(UTC).strftime("%Y-%m-%dT%H")


def parse_hour(label: str) -> datetime:
    """Inverse of :func:`hour_label`."""
    return datetime.strptime(label, "%Y-%m-%dT%H").replace(tzinfo=UTC)


_UNITS = {"m": 1, "h": 60, "d": 24 * 60}
MAX_HORIZON_MINUTES = 7 * 24 * 60


def horizon_minutes(text: str) -> int:
    """``90m``, ``24h``, ``1d`` or ``0`` in minutes; ValueError for anything else."""
    if text.strip() == "0":
        return 0
    try:
        minutes = duration_minutes(text)
    except ValueError:
        raise ValueError(f"must be a duration like 90m, 24h or 1d (or 0), got {text!r}") from None
    if minutes > MAX_HORIZON_MINUTES:
        raise ValueError(f"must be at most 7d, got {text!r}")
    return minutes


def duration_minutes(text: str) -> int:
    """``90m``, ``24h``, ``7d`` in minutes; ValueError for anything else."""
    found = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", text.lower())
    if found is None:
        raise ValueError(f"must be a duration like 90m, 24h or 7d, got {text!r}")
    return int(found[1]) * _UNITS[found[2]]
