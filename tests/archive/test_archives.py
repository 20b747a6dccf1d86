"""The archive generator of bench/archives.py, checked against an independent reader.

``reference`` re-reads an archive with nothing but ``gzip`` and ``json`` and applies
the truth's rules from scratch (which lines a reader keeps, which copy of an event
wins); every test compares the generator's bookkeeping with it.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.archives import (
    EVENT_ID_POINTER,
    Truth,
    add_late_file,
    corrupt,
    generate_archive,
    malformed,
    not_gzip,
    truncate,
)
from consumer.archive.layout import parse_key
from consumer.landing.envelope import Encoder, EventIdPointer
from consumer.sequence import Position
from consumer.stream.records import Record

DAY = date(2026, 11, 22)
RECORDS_PER_FILE = 8
ARRIVAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")

Key = tuple[str, int, int]


@dataclass
class Line:
    """One record line as the reference reads it."""

    position: Key
    event_id: str | None
    arrival: datetime
    document: dict[str, Any]
    raw: bytes
    path: Path


@dataclass
class Reference:
    """The truth, recomputed from the files alone."""

    lines: list[Line] = field(default_factory=list)
    bad_lines: int = 0
    copies: Counter[Key] = field(default_factory=Counter)
    kept: dict[Key, str | None] = field(default_factory=dict)
    kept_per_hour: Counter[int] = field(default_factory=Counter)

    @property
    def transport(self) -> int:
        return sum(count - 1 for count in self.copies.values())

    @property
    def producer(self) -> int:
        return len(self.copies) - len(self.kept)


def _file_lines(path: Path) -> list[bytes]:
    """Complete lines of a file: none if gzip fails, those before the cut if truncated."""
    lines: list[bytes] = []
    try:
        with gzip.open(path) as stream:
            lines.extend(stream)
    except EOFError:  # truncated: what came before the cut, whole lines only
        return [line for line in lines if line.endswith(b"\n")]
    except (gzip.BadGzipFile, zlib.error):  # not gzip, bad data, bad CRC
        return []
    return lines


def _record(raw: bytes, path: Path) -> Line | None:
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    sequence, sub = document.get("sequence_number"), document.get("subsequence_number")
    arrival = document.get("arrival_ts")
    if not (
        isinstance(document.get("shard_id"), str)
        and isinstance(sequence, str)
        and sequence.isdigit()
        and isinstance(sub, int)
        and isinstance(arrival, str)
        and ARRIVAL.fullmatch(arrival)
    ):
        return None
    try:
        when = datetime.strptime(arrival, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    position = (document["shard_id"], int(sequence), sub)
    return Line(position, document.get("event_id"), when, document, raw, path)


def reference(root: Path) -> Reference:
    """Read every object under ``root`` and apply the truth's rules."""
    ref = Reference()
    for path in sorted(root.rglob("*.jsonl.gz")):
        for raw in _file_lines(path):
            line = _record(raw, path)
            if line is None:
                ref.bad_lines += 1
            else:
                ref.lines.append(line)
                ref.copies[line.position] += 1
    first: dict[object, Line] = {}
    for line in ref.lines:
        key = ("event", line.event_id) if line.event_id is not None else ("at", line.position)
        best = first.get(key)
        if best is None or (line.arrival, *line.position) < (best.arrival, *best.position):
            first[key] = line
    for line in first.values():
        ref.kept[line.position] = line.event_id
        ref.kept_per_hour[line.arrival.hour] += 1
    return ref


def assert_matches(truth: Truth, root: Path) -> Reference:
    """The generator's truth is what the files say."""
    ref = reference(root)
    assert truth.readable_lines == len(ref.lines)
    assert truth.positions == set(ref.copies)
    assert truth.transport_duplicates == ref.transport
    assert truth.kept == ref.kept
    assert truth.producer_duplicates == ref.producer
    assert truth.kept_per_hour == dict(ref.kept_per_hour)
    assert truth.readable_lines == (
        len(truth.kept) + truth.transport_duplicates + truth.producer_duplicates
    )
    return ref


def small(root: Path, **overrides: Any) -> Truth:
    """A small archive with every feature on: aggregates, both kinds of duplicates."""
    options: dict[str, Any] = {
        "day": DAY,
        "hours": [6],
        "shards": 2,
        "records_per_minute": 20,
        "records_per_file": RECORDS_PER_FILE,
        "transport_duplicate_share": 0.1,
        "producer_duplicate_share": 0.05,
        "aggregated_share": 0.3,
        "seed": 7,
    } | overrides
    return generate_archive(root, **options)


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    """One seed always writes the same files with the same bytes; another seed does not."""

    def contents(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.jsonl.gz")}

    first, again = small(tmp_path / "a"), small(tmp_path / "b")
    small(tmp_path / "c", seed=8)
    assert contents(tmp_path / "a") == contents(tmp_path / "b")
    assert contents(tmp_path / "a") != contents(tmp_path / "c")
    assert first.kept == again.kept


def test_truth_is_what_the_files_say(tmp_path: Path) -> None:
    """Counts, positions, kept records and per-hour counts match an independent re-read."""
    truth = small(tmp_path, hours=[6, 7], shards=3)
    ref = assert_matches(truth, tmp_path)
    assert truth.lines == len(ref.lines)
    assert ref.bad_lines == 0
    assert sorted(truth.files) == sorted(tmp_path.rglob("*.jsonl.gz"))
    assert len(truth.files) == truth.runs + truth.transport_files
    assert truth.transport_duplicates > 0
    assert truth.producer_duplicates > 0


@pytest.mark.parametrize("event_ids", [True, False])
def test_lines_are_the_encoders(tmp_path: Path, event_ids: bool) -> None:
    """Every line is byte for byte what the lander's Encoder writes for that record."""
    truth = small(tmp_path, event_ids=event_ids)
    encoder = Encoder(truth.stream, "json", EventIdPointer(EVENT_ID_POINTER) if event_ids else None)
    ref = reference(tmp_path)
    for line in ref.lines:
        shard_id, sequence, sub = line.position
        payload = line.raw[line.raw.index(b',"data":') + len(b',"data":') : -2]
        record = Record(
            shard_id, Position(sequence, sub), line.document["partition_key"], payload, line.arrival
        )
        encoded = encoder.encode(record)
        assert isinstance(encoded, tuple)
        assert encoded[0] == line.raw
    assert ("event_id" in ref.lines[0].document) is event_ids


def test_layout_keys_and_sequence_numbers(tmp_path: Path) -> None:
    """Keys parse, bound their lines, hold one minute; sequences are realistic and ordered."""
    truth = small(tmp_path)
    by_file: dict[Path, list[Line]] = defaultdict(list)
    for line in reference(tmp_path).lines:
        by_file[line.path].append(line)
    for path, lines in by_file.items():
        key = parse_key(str(path.relative_to(tmp_path)))
        assert key is not None
        assert key.stream == truth.stream
        assert len(lines) <= RECORDS_PER_FILE
        assert {line.arrival.replace(second=0, microsecond=0) for line in lines} == {key.minute}
        assert {line.position[0] for line in lines} == {key.shard_id}
        assert key.first == Position(*lines[0].position[1:])
        assert key.last == Position(*lines[-1].position[1:])
    first_sequence: dict[str, str] = {}
    for shard_id in truth.shards:
        mine = sorted(p for p in truth.positions if p[0] == shard_id)
        digits = {len(str(p[1])) for p in mine}
        assert digits == ({56} if truth.shards.index(shard_id) % 2 == 0 else {55})
        first_sequence[shard_id] = str(mine[0][1])
    # Across shards, comparing sequence numbers as strings gets the order wrong.
    even, odd = first_sequence[truth.shards[0]], first_sequence[truth.shards[1]]
    assert (even < odd) != (int(even) < int(odd))


def test_shares_and_resends(tmp_path: Path) -> None:
    """Advertised shares hold, and re-sends are 0.1-5 s late, some across minute and hour."""
    truth = small(tmp_path, hours=[6, 7], records_per_minute=60, producer_duplicate_share=0.04)
    per_shard = 60 * 120
    assert truth.resent == truth.producer_duplicates == 2 * round(0.04 * per_shard)
    assert truth.transport_files == round(0.1 * truth.runs)
    assert 0.2 < truth.aggregated / (2 * per_shard) < 0.4
    sequences = Counter(p[:2] for p in truth.positions)
    assert truth.aggregated == sum(count for count in sequences.values() if count > 1)
    by_event: dict[str | None, set[tuple[datetime, Key]]] = defaultdict(set)
    for line in reference(tmp_path).lines:
        by_event[line.event_id].add((line.arrival, line.position))
    resends = [sorted(copies) for copies in by_event.values() if len(copies) > 1]
    assert len(resends) == truth.resent
    for (first, original), (later, resend) in resends:
        assert 0.1 <= (later - first).total_seconds() <= 5
        assert original[0] == resend[0]
        assert original[1] < resend[1]
    assert any(a.minute != b.minute for (a, _), (b, _) in resends)
    assert any(a.hour != b.hour for (a, _), (b, _) in resends)


def test_without_event_ids_resends_are_kept(tmp_path: Path) -> None:
    """Lines without event ids: a compaction cannot see re-sends, so the truth keeps them."""
    truth = small(tmp_path, event_ids=False)
    assert_matches(truth, tmp_path)
    assert truth.resent > 0
    assert truth.producer_duplicates == 0
    assert set(truth.kept.values()) == {None}


def test_truncate_keeps_complete_lines(tmp_path: Path) -> None:
    """A truncated file keeps the complete lines zlib yields; the truth loses the rest."""
    truth = small(tmp_path, records_per_file=200, transport_duplicate_share=0.0)
    path = max(truth.files, key=lambda p: p.stat().st_size)
    before = len(truth.kept)
    damage = truncate(truth, path, 0.5)
    assert 0 < damage.recoverable < damage.lines
    assert len(reference(tmp_path).lines) == truth.readable_lines
    assert_matches(truth, tmp_path)
    assert len(truth.kept) < before


def test_corrupt_loses_the_file_and_promotes_resends(tmp_path: Path) -> None:
    """A corrupt file loses every line; a lost original's re-send elsewhere becomes kept."""
    truth = small(tmp_path, producer_duplicate_share=0.2, transport_duplicate_share=0.0)
    by_event: dict[str | None, list[Line]] = defaultdict(list)
    for line in reference(tmp_path).lines:
        by_event[line.event_id].append(line)
    # A file holding an original whose re-send landed in another file.
    path = next(
        original.path
        for original, *others in (
            sorted(lines, key=lambda x: x.arrival) for lines in by_event.values()
        )
        if any(other.path != original.path for other in others)
    )
    producer = truth.producer_duplicates
    damage = corrupt(truth, path)
    assert damage.recoverable == 0
    assert damage.lines > 0
    assert _file_lines(path) == []
    assert_matches(truth, tmp_path)
    assert truth.producer_duplicates < producer


def test_transport_copy_survives_damage(tmp_path: Path) -> None:
    """Corrupting one of two copies of a run loses nothing but the transport duplicates."""
    truth = small(tmp_path, transport_duplicate_share=1.0, producer_duplicate_share=0.0)
    ref = reference(tmp_path)
    by_file: dict[Path, list[Key]] = defaultdict(list)
    for line in ref.lines:
        by_file[line.path].append(line.position)
    copy = next(path for path, keys in by_file.items() if all(ref.copies[k] == 2 for k in keys))
    kept, transport = dict(truth.kept), truth.transport_duplicates
    damage = corrupt(truth, copy)
    assert truth.kept == kept
    assert truth.transport_duplicates == transport - damage.lines
    assert_matches(truth, tmp_path)


def test_not_gzip_malformed_and_late(tmp_path: Path) -> None:
    """Garbage files add nothing, malformed files only their good lines, late files theirs."""
    truth = small(tmp_path)
    kept = len(truth.kept)
    garbage = not_gzip(truth, tmp_path, hour=6, minute=3)
    mixed = malformed(truth, tmp_path, hour=6, good=20)
    late = add_late_file(truth, tmp_path, 6, records=50)
    assert garbage in truth.files
    assert mixed in truth.files
    assert truth.late == [late]
    assert truth.damaged[garbage].recoverable == 0
    assert truth.damaged[mixed].recoverable == 20
    assert truth.bad_lines == 5
    assert len(truth.kept) == kept + 70
    assert all(parse_key(str(p.relative_to(tmp_path))) for p in (garbage, mixed, late))
    ref = assert_matches(truth, tmp_path)
    assert ref.bad_lines == truth.bad_lines
