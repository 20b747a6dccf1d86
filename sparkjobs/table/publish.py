"""Publishing compacted hours: what each hour was made from, and which hours to rewrite.

The compacted output is an Apache Iceberg table (:mod:`sparkjobs.table.table`). A run
replaces the hours it rewrote in one commit, and the commit's snapshot summary records,
for each of those hours, an :class:`HourEntry`: the digest of the landed objects the
hour was made from, when they were listed, by which run, and how many rows it kept.

- The entry that describes an hour now is the newest one among the current snapshot
  and its ancestors (:func:`entries_from_summaries`): snapshots made by other writers
  (an engine's ``OPTIMIZE``, a delete) carry no entry and change nothing here.
- An hour is *stale* when no entry covers it or its inputs changed since (late files);
  only stale hours are read and rewritten (:func:`stale_hours`).
- Two runs racing: inputs only ever grow, so a later listing has seen at least as much.
  When a commit conflicts, the run keeps only the hours where its listing is newer than
  the one published meanwhile (:func:`winning_hours`) and commits again; no hour goes
  back to older inputs.

Everything here is pure: :mod:`sparkjobs.table.table` does the I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

HOUR_KEY = "lander.hour."
"""Prefix of the summary property holding an hour's entry: ``lander.hour.2026-11-22T13``."""
RUN_KEY = "lander.run-id"


@dataclass(frozen=True, slots=True, order=True)
class InputFile:
    """One landed object as listed: its key relative to the stream, size and mtime (ms)."""

    rel: str
    size: int
    modified_ms: int


def input_order(f: InputFile) -> tuple[str, int, int]:
    """An input's sort key: its fields, in the order ``InputFile`` compares them, but as a
    tuple compared in C, without the dataclass's Python ``__lt__`` per comparison (a day
    planned against a 24 h horizon sorts ~200k inputs)."""
    return f.rel, f.size, f.modified_ms


def inputs_digest(files: Iterable[InputFile]) -> str:
    """A digest of a set of inputs: equal exactly when the same objects, same sizes.

    The SHA-256 of a line ``key<TAB>size`` per (key, size), sorted (:func:`digest_text`).
    """
    return hashlib.sha256(_text(sorted({(f.rel, f.size) for f in files}))).hexdigest()


def digest_text(files: Iterable[InputFile]) -> bytes:
    """What :func:`inputs_digest` hashes, for ``files`` already in key order, each once."""
    return _text((f.rel, f.size) for f in files)


def _text(pairs: Iterable[tuple[str, int]]) -> bytes:
    return "".join(f"{rel}\t{size}\n" for rel, size in pairs).encode()


@dataclass(frozen=True, slots=True)
class HourEntry:
    """What one hour is, as published: the inputs it came from and the run that made it."""

    hour: str
    run_id: str
    listed_at: str
    inputs_digest: str
    inputs: int
    rows: int
    own_digest: str = ""
    """The digest of the hour's own objects (its horizon's not counted) the run read:
    equal to the digest of the hour's objects now, the hour's published rows and its
    dropped copies are every line of those objects (the hour's *index*, which a later
    run reads for its horizon instead of the objects). Empty for entries written before
    the index existed: such an hour is read from its objects."""
    files: int = -1
    """Data files the run wrote for the hour (-1: unknown)."""
    dropped: int = -1
    """Files of the hour's dropped copies (transport and producer duplicates) the run
    wrote beside the table (-1: unknown, no index)."""

    @property
    def indexed(self) -> bool:
        """Whether the run that made the hour wrote its index."""
        return bool(self.own_digest) and self.files >= 0 and self.dropped >= 0

    def newer_than(self, other: HourEntry) -> bool:
        """Whether this entry wins over ``other`` for the same hour."""
        return (self.listed_at, self.run_id) > (other.listed_at, other.run_id)

    def to_summary(self) -> tuple[str, str]:
        """The snapshot summary property that records this entry."""
        body = {k: v for k, v in asdict(self).items() if k != "hour"}
        return HOUR_KEY + self.hour, json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_summary(cls, key: str, value: str) -> HourEntry:
        """Inverse of :meth:`to_summary`; ValueError if it is not one."""
        if not key.startswith(HOUR_KEY):
            raise ValueError(f"not an hour entry: {key}")
        raw = json.loads(value)
        return cls(
            hour=key[len(HOUR_KEY) :],
            run_id=str(raw["run_id"]),
            listed_at=str(raw["listed_at"]),
            inputs_digest=str(raw["inputs_digest"]),
            inputs=int(raw["inputs"]),
            rows=int(raw["rows"]),
            own_digest=str(raw.get("own_digest", "")),
            files=int(raw.get("files", -1)),
            dropped=int(raw.get("dropped", -1)),
        )


def summary_of(run_id: str, entries: Iterable[HourEntry]) -> dict[str, str]:
    """The snapshot summary properties of a commit that publishes ``entries``."""
    summary = {RUN_KEY: run_id}
    summary.update(entry.to_summary() for entry in entries)
    return summary


def entries_from_summaries(
    summaries: Iterable[Mapping[str, str]], hours: Iterable[str] | None = None
) -> dict[str, HourEntry]:
    """Each hour's entry now, from snapshot summaries given newest first (the current
    snapshot, then its ancestors): the newest entry of an hour wins. ``hours`` limits
    the answer; properties that are not entries, or do not parse, are skipped.
    """
    wanted = None if hours is None else set(hours)
    found: dict[str, HourEntry] = {}
    for summary in summaries:
        for key, value in summary.items():
            if not key.startswith(HOUR_KEY):
                continue
            hour = key[len(HOUR_KEY) :]
            if hour in found or (wanted is not None and hour not in wanted):
                continue
            try:
                found[hour] = HourEntry.from_summary(key, value)
            except (ValueError, KeyError, TypeError):
                continue
    return found


def stale_hours(current: Mapping[str, HourEntry], digests: Mapping[str, str]) -> list[str]:
    """The hours of a window (``digests``: hour -> digest of its inputs now) to rewrite."""
    return sorted(
        hour
        for hour, digest in digests.items()
        if hour not in current or current[hour].inputs_digest != digest
    )


def winning_hours(
    rewritten: Mapping[str, HourEntry], current: Mapping[str, HourEntry]
) -> list[str]:
    """The hours a run may still publish after others committed: those where no entry
    is published, or the published one is older than the run's."""
    return sorted(
        hour
        for hour, entry in rewritten.items()
        if hour not in current or entry.newer_than(current[hour])
    )
