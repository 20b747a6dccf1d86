"""Publishing compacted hours: pointers, and which hours a run must rewrite.

Compacted Parquet is written to a directory of its own per run
(``_runs/{run_id}/dt=…/hour=…``) and becomes visible only when a *pointer* naming it is
written, in one atomic write, after the data and the run's manifest:

- a day run writes ``_published/dt=D.json``, an hour run ``_published/dt=D/hour=HH.json``;
- a pointer holds one entry per hour of its window: the files that are that hour, the
  digest of the inputs they were made from, and when those inputs were listed;
- a reader takes, for each hour, the entry with the latest listing among every pointer
  of the day (:func:`resolve`). Inputs only ever grow, so a later listing has seen at
  least as much: two runs racing cannot make an hour go back to older inputs, and no
  reader ever sees part of a run.

An hour is *stale* when no entry covers it or its inputs changed since (late files);
only stale hours are read and rewritten. Unchanged hours of a day run keep their entry,
listing time included, so an older day run cannot shadow a newer hour run.
Everything here is pure: the Spark job and the filesystem do the I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

FORMAT = 1


@dataclass(frozen=True, slots=True, order=True)
class InputFile:
    """One landed object as listed: its key relative to the stream, size and mtime (ms)."""

    rel: str
    size: int
    modified_ms: int


def inputs_digest(files: Iterable[InputFile]) -> str:
    """A digest of a set of inputs: equal exactly when the same objects, same sizes."""
    digest = hashlib.sha256()
    for rel, size in sorted({(f.rel, f.size) for f in files}):
        digest.update(f"{rel}\t{size}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True, order=True)
class OutputFile:
    """A compacted Parquet file: its path relative to the stream's output, and size."""

    path: str
    bytes: int


@dataclass(frozen=True, slots=True)
class HourEntry:
    """What one hour is, as published: its files and the inputs they came from."""

    hour: str
    run_id: str
    listed_at: str
    inputs_digest: str
    inputs: int
    rows: int
    files: tuple[OutputFile, ...] = ()

    def newer_than(self, other: HourEntry) -> bool:
        """Whether this entry wins over ``other`` for the same hour."""
        return (self.listed_at, self.run_id) > (other.listed_at, other.run_id)


@dataclass(frozen=True, slots=True)
class Pointer:
    """One published window: an entry per hour, written in one step."""

    stream: str
    window: str
    run_id: str
    hours: tuple[HourEntry, ...] = field(default_factory=tuple)

    def to_json(self) -> bytes:
        """The pointer file's bytes."""
        body = {"format": FORMAT, **asdict(self)}
        return json.dumps(body, indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, data: bytes | str) -> Pointer:
        """Read a pointer file; ValueError if it is not one."""
        raw: Any = json.loads(data)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError("not a lander pointer (format 1)")
        return cls(
            stream=str(raw["stream"]),
            window=str(raw["window"]),
            run_id=str(raw["run_id"]),
            hours=tuple(_entry(hour) for hour in raw["hours"]),
        )


def _entry(raw: Mapping[str, Any]) -> HourEntry:
    return HourEntry(
        hour=str(raw["hour"]),
        run_id=str(raw["run_id"]),
        listed_at=str(raw["listed_at"]),
        inputs_digest=str(raw["inputs_digest"]),
        inputs=int(raw["inputs"]),
        rows=int(raw["rows"]),
        files=tuple(OutputFile(str(f["path"]), int(f["bytes"])) for f in raw["files"]),
    )


def resolve(pointers: Iterable[Pointer]) -> dict[str, HourEntry]:
    """For each hour, the entry a reader must use: the one with the latest listing."""
    current: dict[str, HourEntry] = {}
    for pointer in pointers:
        for entry in pointer.hours:
            known = current.get(entry.hour)
            if known is None or entry.newer_than(known):
                current[entry.hour] = entry
    return current


def stale_hours(current: Mapping[str, HourEntry], digests: Mapping[str, str]) -> list[str]:
    """The hours of a window (``digests``: hour -> digest of its inputs now) to rewrite."""
    return sorted(
        hour
        for hour, digest in digests.items()
        if hour not in current or current[hour].inputs_digest != digest
    )


def next_pointer(  # noqa: PLR0917 - a pure function of its six inputs
    stream: str,
    window: str,
    run_id: str,
    hours: Iterable[str],
    current: Mapping[str, HourEntry],
    rewritten: Mapping[str, HourEntry],
) -> Pointer:
    """The pointer a run publishes: its rewritten hours, and the rest carried over."""
    entries = []
    for hour in sorted(hours):
        entry = rewritten.get(hour) or current.get(hour)
        if entry is None:
            raise ValueError(f"hour {hour} is neither rewritten nor published")
        entries.append(entry)
    return Pointer(stream, window, run_id, tuple(entries))
