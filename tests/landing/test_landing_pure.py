"""Landing decisions without I/O: keys, landed ranges, envelopes, cuts."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from datetime import UTC, datetime, timedelta
from unittest import mock

import orjson
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

import consumer.landing.batcher as batcher_module
from consumer.archive.layout import minute_of, object_key, parse_key
from consumer.landing.batcher import COMPRESS_CHUNK, GZIP_LEVEL, Batcher, LandedRun
from consumer.landing.deflate import gzip_stream
from consumer.landing.envelope import DeadLetter, Encoder, EventIdPointer
from consumer.landing.ranges import RangeSet
from consumer.sequence import Position
from consumer.stream.records import Record

T0 = datetime(2026, 11, 22, 6, 0, 0, tzinfo=UTC)
positions = st.builds(Position, st.integers(0, 10**56), st.integers(0, 5))


@given(positions, positions, st.datetimes(timezones=st.just(UTC)))
def test_keys_round_trip(a: Position, b: Position, when: datetime) -> None:
    """A key names its shard, minute and both bounds, and parses back to them."""
    first, last = min(a, b), max(a, b)
    key = object_key(
        "archive/x", "orders", "shardId-000000000001", minute_of(when), first=first, last=last
    )
    landed = parse_key(key)
    assert landed is not None
    assert (landed.stream, landed.shard_id) == ("orders", "shardId-000000000001")
    assert (landed.minute, landed.first, landed.last) == (minute_of(when), first, last)
    assert key.endswith(".jsonl.gz")


def test_plain_bounds_read_like_the_design() -> None:
    """Without aggregation a key is {first_seq}-{last_seq}.jsonl.gz."""
    key = object_key("p", "s", "shard-1", T0, first=Position(12), last=Position(345))
    assert key == "p/stream=s/dt=2026-11-22/hour=06/minute=00/shard=shard-1/12-345.jsonl.gz"


@given(st.lists(st.tuples(positions, positions), max_size=20), st.lists(positions, max_size=30))
def test_range_set_agrees_with_a_naive_model(
    ranges: list[tuple[Position, Position]], probes: list[Position]
) -> None:
    """Membership in the merged range set equals membership in any added range."""
    ordered = [(min(a, b), max(a, b)) for a, b in ranges]
    merged = RangeSet(ordered)
    for probe in probes + [p for r in ordered for p in r]:
        assert (probe in merged) == any(a <= probe <= b for a, b in ordered)
    if ordered:
        assert merged.end == max(b for _, b in ordered)


def _record(seq: int, data: bytes, arrival: datetime = T0, sub: int = 0) -> Record:
    return Record("shard-1", Position(seq, sub), "pk", data, arrival)


def test_envelope_splices_the_payload_and_reads_the_event_id() -> None:
    """A JSON payload is kept as sent; the envelope carries position and arrival."""
    encoder = Encoder("orders", "json", EventIdPointer("/meta/id"))
    result = encoder.encode(_record(10**55, b'{"meta": {"id": 7}, "x": [1, 2]}'))
    assert not isinstance(result, DeadLetter)
    line, event_id = result
    assert line.endswith(b'"data":{"meta": {"id": 7}, "x": [1, 2]}}\n')
    doc = json.loads(line)
    assert doc["sequence_number"] == str(10**55)
    assert doc["arrival_ts"] == "2026-11-22T06:00:00.000Z"
    assert doc["event_id"] == "7" == event_id
    assert doc["data"] == {"meta": {"id": 7}, "x": [1, 2]}


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "empty payload"),
        (b"{not json", "invalid JSON"),
        (b'{"a": "\xff\xfe"}', "not UTF-8"),
        (b'{"a": NaN}', "invalid JSON"),
        (b'{"a": 1} trailing', "invalid JSON"),
    ],
)
def test_bad_payloads_become_dead_letters_with_a_reason(payload: bytes, reason: str) -> None:
    """Empty, malformed, non-UTF-8 and non-standard JSON are dead-lettered, not landed."""
    result = Encoder("s").encode(_record(1, payload))
    assert isinstance(result, DeadLetter)
    assert result.reason.startswith(reason)
    line = orjson.loads(result.line("s"))
    assert line["reason"] == result.reason


def test_multiline_json_is_compacted_and_raw_mode_keeps_bytes() -> None:
    """A pretty-printed payload still makes one line; raw mode stores base64."""
    line, _ = Encoder("s").encode(_record(1, b'{\n  "a": 1\n}'))  # type: ignore[misc]
    assert line.count(b"\n") == 1
    assert json.loads(line)["data"] == {"a": 1}
    raw, _ = Encoder("s", "raw").encode(_record(1, b"\xff\x00"))  # type: ignore[misc]
    assert json.loads(raw)["data"] == "/wA="


def test_one_mebibyte_payload_lands() -> None:
    """A 1 MiB JSON payload is a line like any other."""
    payload = json.dumps({"blob": "x" * (1024 * 1024 - 20)}).encode()
    line, _ = Encoder("s").encode(_record(1, payload))  # type: ignore[misc]
    assert len(line) > 1024 * 1024


@st.composite
def record_streams(draw: st.DrawFn) -> list[Record]:
    """Records in shard order with arrivals that mostly advance, sometimes go back."""
    count = draw(st.integers(1, 80))
    records = []
    arrival = T0
    seq = 10**50
    for _ in range(count):
        arrival += timedelta(seconds=draw(st.sampled_from([0, 0.5, 3, 20, 61, -30])))
        seq += draw(st.integers(1, 10**6))
        size = draw(st.integers(1, 300))
        records.append(_record(seq, json.dumps({"p": "x" * size}).encode(), arrival))
    return records


def _cut(
    records: list[Record], max_records: int, max_bytes: int, *, general: bool = False
) -> list[LandedRun]:
    """The runs the lander's per-line path cuts (``general``: through ``add``)."""
    batcher = Batcher("shard-1", max_records, max_bytes, flush_seconds=10.0)
    add = batcher.add if general else batcher.add_line
    encoder = Encoder("s")
    runs = []
    for record in records:
        line, _ = encoder.encode(record)  # type: ignore[misc]
        closed = add(record, line, now=0.0)
        if closed:
            runs.append(closed)
    closed = batcher.close()
    if closed:
        runs.append(closed)
    return runs


@given(record_streams(), st.integers(1, 20), st.integers(1024, 8000))
def test_cuts_follow_the_rules_and_replays_cut_identically(
    records: list[Record], max_records: int, max_bytes: int
) -> None:
    """Every run is one minute, within the limits and the arrival span; replaying from
    any run boundary reproduces the same keys and the same bytes."""
    runs = _cut(records, max_records, max_bytes)
    assert _cut(records, max_records, max_bytes, general=True) == runs
    assert [r.first for r in runs] == sorted(r.first for r in runs)
    assert sum(r.lines for r in runs) == len(records)
    index = 0
    for run in runs:
        members = records[index : index + run.lines]
        index += run.lines
        assert members[0].position == run.first
        assert members[-1].position == run.last
        assert {minute_of(r.arrival) for r in members} == {run.minute}
        assert len(members) <= max_records
        assert run.raw_bytes <= max_bytes or run.lines == 1
        assert all(r.arrival - members[0].arrival < timedelta(seconds=10) for r in members)
        assert len(gzip.decompress(run.body).splitlines()) == run.lines
    for start in range(len(runs)):
        offset = sum(r.lines for r in runs[:start])
        replay = _cut(records[offset:], max_records, max_bytes)
        assert [(r.first, r.last, r.body) for r in replay] == [
            (r.first, r.last, r.body) for r in runs[start:]
        ]


class _SeenCompressor:
    """The Batcher's own compressor (:func:`gzip_stream`), recording what it is fed."""

    def __init__(self, level: int = GZIP_LEVEL) -> None:
        self.level = level
        self.real = gzip_stream(level)
        self.pieces: list[bytes] = []

    def compress(self, data: bytes) -> bytes:
        self.pieces.append(data)
        return self.real.compress(data)

    def flush(self) -> bytes:
        return self.real.flush()


def _repeated(pattern: bytes, size: int) -> bytes:
    return (pattern * (size // len(pattern) + 1))[:size]


# Small lines, and long ones (a short pattern repeated to 1-96 KiB) so that runs cross
# the batcher's COMPRESS_CHUNK (64 KiB) never, once or several times.
landed_lines = st.lists(
    st.one_of(
        st.binary(max_size=300),
        st.builds(_repeated, st.binary(min_size=1, max_size=64), st.integers(1024, 96 * 1024)),
    ),
    min_size=1,
    max_size=20,
)


@given(landed_lines)
@example([bytes(range(256)) * 100] * 8)  # 200 KiB in 25 KiB lines: three chunks and a tail
@example([b"x" * (COMPRESS_CHUNK - 1), b"y", b"z"])  # the chunk edge
@example([b""])
def test_a_runs_body_is_one_gzip_member_of_its_lines_however_they_were_fed(
    lines: list[bytes],
) -> None:
    """Pins the Batcher's compression path: the lines of a run are compressed at the
    batcher's GZIP_LEVEL by :func:`gzip_stream`, in pieces of about COMPRESS_CHUNK as
    they arrive (memory stays bounded), and the run's body is one complete gzip member
    (trailer CRC and length checked, nothing after it) holding exactly the lines, with a
    fixed header (mtime 0, no file name), byte for byte what compressing all the lines
    at once at that level gives: how lines were fed never changes the landed bytes, so a
    replayed run hashes equal to the landed one."""
    made: list[_SeenCompressor] = []

    def seen_stream(level: int = GZIP_LEVEL, codec: str = "zlib") -> _SeenCompressor:
        assert codec == "zlib"
        made.append(_SeenCompressor(level))
        return made[-1]

    batcher = Batcher("shard-1", len(lines) + 1, 1 << 40, flush_seconds=10.0)
    with mock.patch.object(batcher_module, "gzip_stream", seen_stream):
        for seq, line in enumerate(lines, 1):
            assert batcher.add(_record(seq, b"{}"), line, now=0.0) is None
        run = batcher.close()
    assert run is not None
    whole = b"".join(lines)
    assert (run.lines, run.raw_bytes) == (len(lines), len(whole))
    assert run.content_sha256 == hashlib.sha256(whole).hexdigest()

    (compressor,) = made
    assert compressor.level == GZIP_LEVEL == batcher.gzip_level
    assert b"".join(compressor.pieces) == whole
    longest = max(len(line) for line in lines)
    assert all(len(piece) < COMPRESS_CHUNK + longest for piece in compressor.pieces)
    event(f"compressed in {sum(1 for p in compressor.pieces if p)} non-empty piece(s)")

    member = zlib.decompressobj(31)  # gzip only: raises on a bad header, CRC or length
    assert member.decompress(run.body) == whole
    assert member.eof, "the gzip member has no trailer"
    assert member.unused_data == b""
    assert run.body[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + run.body[8:9] + b"\x03"
    at_once = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    assert run.body == at_once.compress(whole) + at_once.flush()


def test_quiet_shard_flushes_by_clock() -> None:
    """A run open for flush_seconds by the worker's clock closes without new records."""
    batcher = Batcher("shard-1", 100, 10_000, flush_seconds=5.0)
    batcher.add(_record(1, b"{}"), b"x\n", now=100.0)
    assert batcher.due(104.9) is None
    run = batcher.due(105.0)
    assert run is not None
    assert run.lines == 1
    assert not batcher.open


@given(st.datetimes(timezones=st.just(UTC)))
def test_arrival_microseconds_are_exact(when: datetime) -> None:
    """The hot path cuts and formats on integer microseconds: they are exactly the
    datetime's (no float rounding), for any time, before the epoch included."""
    from consumer.stream.records import EPOCH, epoch_us

    us = epoch_us(when)
    assert EPOCH + timedelta(microseconds=us) == when
    record = _record(1, b"{}", when)
    assert record.micros() == us
    assert record.arrival_us == us


@given(st.integers(0, 59_999_999), st.sampled_from([0.001, 0.0015, 1.0, 60.0, 0.3333335]))
def test_the_flush_rule_cuts_exactly_at_flush_seconds(offset_us: int, flush: float) -> None:
    """Rule 4 on integers cuts where the datetime comparison did: a record arriving
    ``flush_seconds`` or more (to the microsecond) after the run's first starts a new
    run, one a microsecond sooner does not."""
    first = T0 + timedelta(microseconds=offset_us % 1000)
    flush_delta = timedelta(seconds=flush)
    for gap, cuts in ((flush_delta - timedelta(microseconds=1), False), (flush_delta, True)):
        batcher = Batcher("shard-1", 100, 1 << 30, flush_seconds=flush)
        batcher.add(_record(1, b"{}", first), b"{}\n", now=0.0)
        closed = batcher.add(_record(2, b"{}", first + gap), b"{}\n", now=0.0)
        crossed_minute = minute_of(first + gap) != minute_of(first)
        assert (closed is not None) == (cuts or crossed_minute)
