"""The truth about a landed archive: what a correct compaction of a window publishes.

A model in plain Python, read straight from the files (``zlib`` and ``json``, nothing
of the lander's), for the archives of :mod:`bench.prodlike` and any other archive in
the layout of docs/landing.md. Compactions (the Spark job, the DuckDB baseline of
:mod:`bench.compaction_duckdb`) are held to it row for row.

Reading
-------
- An object is read with ``zlib`` (gzip wrapper, every member): ``ok`` when it ends
  cleanly, ``truncated`` when its bytes stop before the stream ends, ``corrupt`` for
  anything else (not gzip, bad data, a checksum mismatch, junk after the stream).
- Its lines are the bytes between ``\\n``: every line of an ok object (a last line
  without its newline included), only the complete ones of a truncated object, none of
  a corrupt one. Blank lines (whitespace only) are skipped, as
  ``consumer.archive.codec.recover_lines`` skips them.
- A line is a *record* when it ends in ``}``, holds ``,"data":`` with a non-empty
  payload between its first occurrence and that final ``}`` (or, written with blanks,
  ``, "data": …}``: the payload without the blanks around it), is UTF-8, and the header
  before the marker (closed with ``}``) is a JSON object whose ``stream`` is the
  stream's, with string ``shard_id`` and ``partition_key``, a ``sequence_number`` of
  1-128 ASCII digits, an integer ``subsequence_number`` >= 0, an ``arrival_ts`` of the
  form ``YYYY-MM-DDTHH:MM:SS.mmmZ`` naming a real instant, and an ``event_id`` that is
  absent, null or a string. Any other line is *malformed*. ``data`` is the payload's
  bytes exactly as they stand in the line.
- Each record belongs to the hour of its object's key (``dt=…/hour=…``), not of its
  ``arrival_ts``; the lander names objects after the arrival minute, so they agree on
  landed data.

Deduplication (:func:`fates`)
-----------------------------
- Records are ordered by (arrival, shard id, length of the sequence number, sequence
  number, subsequence number, the object's key below the stream): :func:`order_key`.
- A position is (shard id, sequence number, subsequence number). Every copy of a
  position after its first in that order is a **transport** duplicate.
- For each event id, its positions (their first copies) in order: a position is a
  **producer** duplicate when the previous position of the same event id arrived at
  most the horizon before it (any earlier copy, kept or not, so a chain of retries
  each within the horizon of the one before is dropped whole after the first).
- Records without an event id are deduplicated by position only. All others are
  **kept**.

A window (a day ``YYYY-MM-DD`` or an hour ``YYYY-MM-DDTHH``) publishes the kept records
of its objects, judged among *all* records given (copies before the window count as
earlier copies): :func:`truth`.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Literal, NamedTuple

MARKER = b',"data":'
"""What precedes the payload in a landed line (its first occurrence)."""
MAX_SEQUENCE_DIGITS = 128
DEFAULT_HORIZON = timedelta(days=1)

Status = Literal["ok", "truncated", "corrupt"]
Cause = Literal["kept", "transport", "producer"]

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_ARRIVAL = re.compile(rb"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z")
_SEQUENCE = re.compile(f"[0-9]{{1,{MAX_SEQUENCE_DIGITS}}}")
_REL = re.compile(
    r"(?:^|/)(dt=(\d{4}-\d{2}-\d{2})/hour=(\d{2})/minute=\d{2}/shard=[^/]+/[^/]+\.jsonl\.gz)$"
)
_SPACED = re.compile(rb'(.*?),\s*"data"\s*:\s*(.*?)\s*\}\s*')
"""Another writer's spacing (``, "data": …``): read too, as the Spark job reads it."""
_WINDOW = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2})?")
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class Record(NamedTuple):
    """One readable record line, as far as the truth cares."""

    shard_id: str
    sequence_number: str
    subsequence_number: int
    arrival_ms: int
    """``arrival_ts`` as milliseconds since the epoch."""
    event_id: str | None
    data: bytes
    """The payload's bytes as written (empty when read with ``keep_data=False``)."""
    size: int
    """``len`` of the payload's bytes, kept even when ``data`` is not."""
    rel: str
    """The object's key below the stream's folder: ``dt=…/hour=…/minute=…/shard=…/name``."""
    hour: str
    """``YYYY-MM-DDTHH`` of the object's key."""

    @property
    def position(self) -> tuple[str, str, int]:
        """Where the record sits in the stream: the same for every copy of it."""
        return (self.shard_id, self.sequence_number, self.subsequence_number)


def order_key(record: Record) -> tuple[int, str, int, str, int, str]:
    """The order records are judged in; the first of equals wins."""
    sequence = record.sequence_number
    return (
        record.arrival_ms,
        record.shard_id,
        len(sequence),
        sequence,
        record.subsequence_number,
        record.rel,
    )


# ---------------------------------------------------------------- reading


def read_body(body: bytes) -> tuple[Status, list[bytes]]:
    """The status of one object's bytes and its readable lines (without ``\\n``)."""
    if body[:2] != b"\x1f\x8b":
        return "corrupt", []
    chunks: list[bytes] = []
    pending = body
    while True:
        inflate = zlib.decompressobj(_GZIP_WBITS)
        try:
            chunks.append(inflate.decompress(pending))
            chunks.append(inflate.flush())
        except zlib.error:
            return "corrupt", []
        if not inflate.eof:
            parts = b"".join(chunks).split(b"\n")
            return "truncated", [line for line in parts[:-1] if line.strip()]
        pending = inflate.unused_data
        if not pending:
            break
        if pending[:2] != b"\x1f\x8b":
            return "corrupt", []
    return "ok", [line for line in b"".join(chunks).split(b"\n") if line.strip()]


def hour_of_rel(rel: str) -> str:
    """``YYYY-MM-DDTHH`` of a relative key ``dt=…/hour=…/…``."""
    return f"{rel[3:13]}T{rel[19:21]}"


def relative_key(path: str) -> str | None:
    """The key of a landed object below its stream's folder, or None for another path."""
    match = _REL.search(path)
    return None if match is None else match[1]


def _arrival_ms(text: str) -> int | None:
    match = _ARRIVAL.fullmatch(text.encode())
    if match is None:
        return None
    year, month, day, hour, minute, second, milli = (int(part) for part in match.groups())
    try:
        datetime(year, month, day, hour, minute, second)  # month 13, hour 24 and the like
    except ValueError:
        return None
    days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    return (((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + milli


def parse_record(
    line: bytes, stream: str, rel: str, hour: str, *, keep_data: bool = True
) -> Record | None:
    """The record a line holds (see the module docstring), or None for a malformed line."""
    at = line.find(MARKER)
    if at >= 0 and line.endswith(b"}"):
        header, data = line[:at], line[at + len(MARKER) : -1]
    elif spaced := _SPACED.fullmatch(line):
        header, data = spaced[1], spaced[2]
    else:
        return None
    if not data:
        return None
    try:
        data.decode()
        head = json.loads(header + b"}")
    except ValueError:  # UnicodeDecodeError is one
        return None
    if not isinstance(head, dict) or head.get("stream") != stream:
        return None
    shard_id, sequence = head.get("shard_id"), head.get("sequence_number")
    sub, key = head.get("subsequence_number"), head.get("partition_key")
    arrival, event_id = head.get("arrival_ts"), head.get("event_id")
    if not (
        isinstance(shard_id, str)
        and isinstance(key, str)
        and isinstance(sequence, str)
        and _SEQUENCE.fullmatch(sequence)
        and type(sub) is int
        and sub >= 0
        and isinstance(arrival, str)
        and (event_id is None or isinstance(event_id, str))
    ):
        return None
    arrival_ms = _arrival_ms(arrival)
    if arrival_ms is None:
        return None
    return Record(
        shard_id,
        sequence,
        sub,
        arrival_ms,
        event_id,
        data if keep_data else b"",
        len(data),
        rel,
        hour,
    )


@dataclass
class Readout:
    """Everything a correct reader gets from a set of objects."""

    records: list[Record] = field(default_factory=list)
    malformed: Counter[str] = field(default_factory=Counter)
    """Malformed lines per hour of their object's key."""
    objects: dict[str, Status] = field(default_factory=dict)
    """Each object read (its relative key) and how it read."""

    def add(
        self, rel: str, body: bytes, stream: str, *, keep_data: bool = True
    ) -> tuple[Status, int]:
        """Read one object's bytes into the readout; its status and readable lines."""
        status, lines = read_body(body)
        self.objects[rel] = status
        hour = hour_of_rel(rel)
        for line in lines:
            record = parse_record(line, stream, rel, hour, keep_data=keep_data)
            if record is None:
                self.malformed[hour] += 1
            else:
                self.records.append(record)
        return status, len(lines)


def read_archive(
    root: Path,
    stream: str,
    *,
    only: Iterable[str] | None = None,
    keep_data: bool = True,
) -> Readout:
    """Read every landed object of ``stream`` under the archive at ``root``.

    ``only``: relative keys to read instead of all. ``keep_data=False`` keeps payload
    sizes, not payloads (a 2M-line day then fits in far less memory).
    """
    folder = root / f"stream={stream}"
    readout = Readout()
    if only is not None:
        rels = sorted(only)
    else:
        found = (relative_key(path.relative_to(folder).as_posix()) for path in folder.rglob("*"))
        rels = sorted(rel for rel in found if rel is not None)
    for rel in rels:
        readout.add(rel, (folder / rel).read_bytes(), stream, keep_data=keep_data)
    return readout


# ---------------------------------------------------------------- deduplication


def fates(records: Sequence[Record], horizon: timedelta = DEFAULT_HORIZON) -> list[Cause]:
    """Each record's fate under the rules of the module docstring, in input order."""
    horizon_ms = horizon // timedelta(milliseconds=1)
    found: list[Cause] = ["kept"] * len(records)
    seen: set[tuple[str, str, int]] = set()
    previous: dict[str, int] = {}
    for i in sorted(range(len(records)), key=lambda i: order_key(records[i])):
        record = records[i]
        position = record.position
        if position in seen:
            found[i] = "transport"
            continue
        seen.add(position)
        event_id = record.event_id
        if event_id is None:
            continue
        before = previous.get(event_id)
        previous[event_id] = record.arrival_ms
        if before is not None and before >= record.arrival_ms - horizon_ms:
            found[i] = "producer"
    return found


class Row(NamedTuple):
    """One published row, as far as the comparison goes."""

    shard_id: str
    sequence_number: str
    subsequence_number: int
    event_id: str | None
    data: bytes


@dataclass(frozen=True, slots=True)
class HourCounts:
    """One hour's lines by fate."""

    kept: int = 0
    transport: int = 0
    producer: int = 0
    malformed: int = 0


@dataclass(frozen=True)
class WindowTruth:
    """What a correct compaction of one window publishes and drops."""

    window: str
    horizon: timedelta
    rows: list[Row]
    """Kept rows, sorted by shard, sequence number (as a number) and subsequence."""
    hours: dict[str, HourCounts]
    """Per ``YYYY-MM-DDTHH`` of the window that has any line."""
    payload_bytes: int
    """UTF-8 bytes of the kept rows' payloads."""

    @property
    def kept(self) -> int:
        return sum(counts.kept for counts in self.hours.values())

    @property
    def transport(self) -> int:
        return sum(counts.transport for counts in self.hours.values())

    @property
    def producer(self) -> int:
        return sum(counts.producer for counts in self.hours.values())

    @property
    def malformed(self) -> int:
        return sum(counts.malformed for counts in self.hours.values())

    @property
    def records(self) -> int:
        """Readable records of the window: kept, transport and producer."""
        return self.kept + self.transport + self.producer


def in_window(hour: str, window: str) -> bool:
    """Whether an hour ``YYYY-MM-DDTHH`` lies in a window (a day or an hour)."""
    return hour == window if len(window) > 10 else hour[:10] == window


def truth(readout: Readout, window: str, horizon: timedelta = DEFAULT_HORIZON) -> WindowTruth:
    """The truth for ``window`` (``YYYY-MM-DD`` or ``YYYY-MM-DDTHH``), all records visible."""
    if not _WINDOW.fullmatch(window):
        raise ValueError(f"a window is YYYY-MM-DD or YYYY-MM-DDTHH: {window!r}")
    records = readout.records
    counts: dict[str, Counter[Cause]] = {}
    rows: list[Row] = []
    payload = 0
    for record, cause in zip(records, fates(records, horizon), strict=True):
        if not in_window(record.hour, window):
            continue
        counts.setdefault(record.hour, Counter())[cause] += 1
        if cause == "kept":
            rows.append(
                Row(
                    record.shard_id,
                    record.sequence_number,
                    record.subsequence_number,
                    record.event_id,
                    record.data,
                )
            )
            payload += record.size
    for hour in readout.malformed:
        if in_window(hour, window):
            counts.setdefault(hour, Counter())
    rows.sort(key=lambda row: (row.shard_id, len(row.sequence_number), *row[1:3]))
    hours = {
        hour: HourCounts(
            kept=found["kept"],
            transport=found["transport"],
            producer=found["producer"],
            malformed=readout.malformed.get(hour, 0),
        )
        for hour, found in sorted(counts.items())
    }
    return WindowTruth(window, horizon, rows, hours, payload)
