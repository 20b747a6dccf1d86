"""The production-like archive of bench/prodlike.py and the truth of bench/prodlike_truth.py.

The archive is written without the lander's code; here it is read back with the
lander's own parsers (:func:`~consumer.archive.layout.parse_relative`,
:func:`~consumer.archive.envelope.parse_line`) and the Spark job's integrity checks
(:func:`~consumer.archive.codec.check_object`, :func:`~consumer.archive.codec.recover_lines`),
so both sides agree on the format. The truth is pinned by hand-made cases and by two
properties: a day is the union of its hours, and an hour needs only the horizon before
it.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.prodlike import DAY, SHAPES, STREAM, ProdArchive, generate
from bench.prodlike_truth import (
    Readout,
    Record,
    fates,
    hour_of_rel,
    parse_record,
    read_archive,
    read_body,
    truth,
)
from consumer.archive.codec import check_object, recover_lines
from consumer.archive.envelope import format_ts, parse_line, parse_ts
from consumer.archive.layout import parse_relative
from tests.support.landed import malformed_variants

SEED = 5
D = DAY.isoformat()
H = timedelta(hours=1)
ONE_DAY = timedelta(days=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Built:
    """The small archive, both phases written, and what each phase reported."""

    archive: ProdArchive
    shapes: dict[str, int]
    truncated: dict[str, tuple[int, int]]
    corrupt: dict[str, str]
    late: list[str]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    archive = ProdArchive(tmp_path_factory.mktemp("prodlike"), "small", SEED)
    first, second = archive.write_phase(1), archive.write_phase(2)
    return Built(
        archive,
        dict(first.shapes + second.shapes),
        first.truncated | second.truncated,
        first.corrupt | second.corrupt,
        second.late,
    )


def objects(root: Path) -> dict[str, bytes]:
    """Every object under an archive: key relative to the stream -> bytes."""
    folder = root / f"stream={STREAM}"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.gz")}


def ok_lines(built: Built) -> Iterable[tuple[str, bytes]]:
    """(relative key, line) of every line of every undamaged object, read from disk."""
    damaged = built.truncated.keys() | built.corrupt.keys()
    for rel, body in objects(built.archive.root).items():
        if rel not in damaged:
            # By "\n" only: U+2028 and U+0085 are inside payloads.
            for line in gzip.decompress(body).split(b"\n")[:-1]:
                yield rel, line + b"\n"


def planned_lines(built: Built) -> Iterable[bytes]:
    """Every line the generator wrote, damaged and late objects included, before damage."""
    for rel in built.archive.objects:
        yield from built.archive.object_lines(rel)


def millis(when: str) -> int:
    """Milliseconds since the epoch of ``YYYY-MM-DDTHH:MM:SS.mmm``."""
    return (parse_ts(when + "Z") - EPOCH) // timedelta(milliseconds=1)


# ---------------------------------------------------------------- the archive


def test_same_seed_same_bytes(tmp_path: Path, built: Built) -> None:
    """One seed always writes the same objects with the same bytes; another does not."""
    generate(tmp_path / "again", "small", SEED)
    generate(tmp_path / "other", "small", SEED + 1)
    first = objects(built.archive.root)
    assert objects(tmp_path / "again") == first
    assert objects(tmp_path / "other").keys().isdisjoint(first)
    assert set(first) == set(built.archive.objects)
    assert 300 <= len(first) <= 1_000


def test_keys_are_the_layouts(built: Built) -> None:
    """Every key parses with the lander's layout: the minute, shard and bounds it names."""
    for rel in objects(built.archive.root):
        key = parse_relative(f"stream={STREAM}/{rel}")
        assert key is not None, rel
        assert key.rel == rel
        assert key.minute.date() == DAY
        first, last = rel.rsplit("/", 1)[1].removesuffix(".jsonl.gz").split("-")
        assert len(first) == len(last) == 56


def test_lines_are_envelopes_carrying_the_payload(built: Built) -> None:
    """Each line parses with the lander's parser, fields in order, data verbatim."""
    archive = built.archive
    lines = 0
    by_shard: dict[str, list[tuple[str, int]]] = {}
    for rel, raw in ok_lines(built):
        lines += 1
        assert raw.endswith(b"}\n")
        line = parse_line(raw)
        assert line.has_event_id
        assert line.stream == STREAM
        assert f"shard={line.shard_id}/" in rel
        assert line.subsequence_number == 0
        assert len(line.sequence_number) == 56
        when = parse_ts(line.arrival_ts)
        assert format_ts(when) == line.arrival_ts
        assert rel.startswith(f"dt={D}/hour={when:%H}/minute={when:%M}/")
        assert line.data == archive.payload_at(line.shard_id, line.sequence_number)
        document = orjson.loads(line.data)  # what the lander validates payloads with
        if isinstance(document, dict) and "event_id" in document:
            assert document["event_id"] == line.event_id
        by_shard.setdefault(line.shard_id, []).append((line.arrival_ts, int(line.sequence_number)))
    assert lines > 1_500
    for records in by_shard.values():
        # Sequence numbers grow with arrival within a shard.
        ordered = sorted(set(records))
        assert [sequence for _, sequence in ordered] == sorted(s for _, s in ordered)


def test_every_payload_shape_occurs(built: Built) -> None:
    """Every shape and every listed variant is in the small archive."""
    assert set(built.shapes) == set(SHAPES)
    payloads = {parse_line(raw).data for raw in planned_lines(built)}
    for wanted in (
        b'"just a string"',
        b'"42"',
        b'"true"',
        b'""',
        b"true",
        b"false",
        b"null",
        b"{}",
        b"[]",
        b"1E+2",
        b"-0.0",
        b"1e-7",
        b"123456789012345678901234567890",
    ):
        assert wanted in payloads, wanted
    text = b"\n".join(payloads)
    for fragment in (
        b"0.1000000000000000055511151231257827",
        b'"hundred":1E+2',
        b'"negative_zero":-0.0',
        b'"tiny":1e-7',
        b"\\u00e9",
        "Zoë".encode(),
        "🚀".encode(),
        "\u2028".encode(),
        b'{"event_id": ',
        b'"b": [1, 2]',
        b"[{",
    ):
        assert fragment in text, fragment
    # Integers beyond 64 bits, and JSON strings holding what precedes data in a line.
    assert any(len(number) > 20 for number in re.findall(rb"\d+", text))
    assert b',\\"data\\":' in text


def test_odd_event_ids_and_keys(built: Built) -> None:
    """Null, empty, non-ASCII and marker-holding event ids and partition keys occur."""
    parsed = [parse_line(raw) for raw in planned_lines(built)]
    ids = {line.event_id for line in parsed}
    assert {None, "", 'x","data":"y', "zamówienie-ünïcødé-🚀"} <= ids
    keys = {line.partition_key for line in parsed}
    assert any(not key.isascii() for key in keys)


def test_duplicates_of_both_kinds(built: Built) -> None:
    """Transport copies are sub-ranges of a run; producer retries come seconds to hours late."""
    archive = built.archive
    assert archive.transport_copies
    for rel in archive.transport_copies:
        copied = archive.object_lines(rel)
        assert gzip.decompress(archive.path(rel).read_bytes()) == b"".join(copied)
        shard, first, stop = archive.objects[rel]
        folder = rel.rsplit("/", 1)[0] + "/"
        (run,) = (
            other
            for other, (s, start, end) in archive.objects.items()
            if other.startswith(folder)
            and s == shard
            and start <= first < stop <= end
            and (start, end) != (first, stop)
        )
        lines = archive.object_lines(run)
        assert any(lines[i : i + len(copied)] == copied for i in range(len(lines))), rel
    assert {"seconds", "minutes", "hours", "race", "chained"} <= set(archive.retries)
    delays = [later - arrival for _, _, arrival, _, later in archive.hour_retries]
    assert delays
    assert all(3_600_000 <= delay <= 6 * 3_600_000 for delay in delays)
    readout = read_archive(archive.root, STREAM)
    day, hourly = truth(readout, D), truth(readout, D, H)
    assert day.transport > 0
    assert day.producer > hourly.producer > 0
    assert day.kept < hourly.kept


def test_truncated_objects_keep_their_complete_lines(built: Built) -> None:
    """A truncated object recovers exactly its lines before the cut; the cut is mid-line."""
    archive = built.archive
    assert built.truncated
    for rel, (written, complete) in built.truncated.items():
        body = archive.path(rel).read_bytes()
        check = check_object(body)
        assert check.status == "truncated"
        assert check.lines == complete
        assert 1 <= complete < written
        expected = archive.object_lines(rel)
        assert len(expected) == written
        assert recover_lines(body) == [line.rstrip(b"\n").decode() for line in expected[:complete]]
        status, lines = read_body(body)
        assert status == "truncated"
        assert [line + b"\n" for line in lines] == expected[:complete]


def test_corrupt_objects_are_corrupt(built: Built) -> None:
    """Not gzip, flipped bytes and junk after the stream: each classified corrupt."""
    assert sorted(built.corrupt.values()) == ["flipped", "junk_after", "not_gzip"]
    readout = read_archive(built.archive.root, STREAM)
    for rel in built.corrupt:
        body = built.archive.path(rel).read_bytes()
        assert check_object(body).status == "corrupt", rel
        assert readout.objects[rel] == "corrupt"
    assert not any(record.rel in built.corrupt for record in readout.records)


def test_undamaged_archive_leaves_damaged_objects_out(tmp_path: Path, built: Built) -> None:
    """damaged=False writes the same archive without the damaged objects."""
    generate(tmp_path, "small", SEED, damaged=False)
    damaged = built.truncated.keys() | built.corrupt.keys()
    full = objects(built.archive.root)
    assert objects(tmp_path) == {rel: body for rel, body in full.items() if rel not in damaged}


def test_late_objects_change_other_hours(tmp_path: Path, built: Built) -> None:
    """Phase 2 adds objects in earlier hours, and changes what another hour keeps."""
    archive = ProdArchive(tmp_path, "small", SEED)
    archive.write_phase(1)
    before = read_archive(tmp_path, STREAM)
    assert not set(built.late) & set(before.objects)
    archive.write_phase(2)
    after = read_archive(tmp_path, STREAM)
    assert set(after.objects) - set(before.objects) == set(built.late) == set(archive.late)
    late_hours = {hour_of_rel(rel) for rel in built.late}
    then, now = truth(before, D), truth(after, D)
    changed = {
        hour
        for hour in now.hours
        if hour not in late_hours and now.hours[hour] != then.hours.get(hour)
    }
    assert changed, "no late object holds a copy of an event kept in another hour"


# ---------------------------------------------------------------- the truth by hand


def record(
    when: str,
    event_id: str | None,
    *,
    shard: str = "shardId-000000000000",
    sequence: str = "1",
    rel: str | None = None,
    data: bytes = b"{}",
) -> Record:
    """A record arriving at ``when`` (``YYYY-MM-DDTHH:MM:SS.mmm``), in its minute's folder."""
    folder = f"dt={when[:10]}/hour={when[11:13]}/minute={when[14:16]}/shard={shard}"
    name = rel or f"{folder}/{sequence}-{sequence}.jsonl.gz"
    return Record(
        shard, sequence, 0, millis(when), event_id, data, len(data), name, hour_of_rel(name)
    )


def readout(*records: Record) -> Readout:
    return Readout(records=list(records))


def test_a_retry_ten_minutes_later_is_a_producer_duplicate() -> None:
    first = record(f"{D}T10:00:00.000", "e", sequence="1")
    retry = record(f"{D}T10:10:00.000", "e", sequence="2")
    assert fates([retry, first]) == ["producer", "kept"]
    found = truth(readout(first, retry), D)
    assert [row.sequence_number for row in found.rows] == ["1"]
    assert found.hours[f"{D}T10"].producer == 1


def test_a_retry_beyond_the_horizon_is_kept() -> None:
    first = record("2026-11-20T10:00:00.000", "e", sequence="1")
    retry = record("2026-11-21T11:00:00.000", "e", sequence="2")
    assert fates([first, retry], ONE_DAY) == ["kept", "kept"]
    assert fates([first, retry], timedelta(hours=25)) == ["kept", "producer"]
    exactly = record("2026-11-21T10:00:00.000", "e", sequence="3")
    assert fates([first, exactly], ONE_DAY) == ["kept", "producer"]
    just_after = record("2026-11-21T10:00:00.001", "e", sequence="4")
    assert fates([first, just_after], ONE_DAY) == ["kept", "kept"]


def test_a_chain_of_retries_each_within_the_horizon_is_dropped_after_the_first() -> None:
    """20 h apart with a 24 h horizon: the third is 40 h after the first, yet its previous
    copy is 20 h before it."""
    chain = [
        record("2026-11-20T00:00:00.000", "e", sequence="1"),
        record("2026-11-20T20:00:00.000", "e", sequence="2"),
        record("2026-11-21T16:00:00.000", "e", sequence="3"),
    ]
    assert fates(chain, timedelta(hours=24)) == ["kept", "producer", "producer"]
    assert fates(chain, timedelta(hours=19)) == ["kept", "kept", "kept"]
    assert truth(readout(*chain), D, timedelta(hours=24)).rows == []


def test_transport_copies_keep_the_first_object() -> None:
    when = f"{D}T10:00:00.000"
    folder = f"dt={D}/hour=10/minute=00/shard=shardId-000000000000/"
    whole = record(when, "e", rel=folder + "1-9.jsonl.gz")
    part = record(when, "e", rel=folder + "1-5.jsonl.gz")
    other = record(when, None, sequence="2", rel=folder + "1-9.jsonl.gz")
    other_copy = record(when, None, sequence="2", rel=folder + "1-5.jsonl.gz")
    assert fates([whole, part, other, other_copy]) == ["transport", "kept", "transport", "kept"]
    found = truth(readout(whole, part, other, other_copy), f"{D}T10")
    assert found.hours[f"{D}T10"].transport == 2
    assert found.kept == 2


def test_ties_in_arrival_go_to_the_lower_shard_then_the_lower_sequence() -> None:
    when = f"{D}T10:00:00.000"
    high = record(when, "e", shard="shardId-000000000001", sequence="1")
    low = record(when, "e", shard="shardId-000000000000", sequence="5")
    assert fates([high, low]) == ["producer", "kept"]
    longer = record(when, "f", sequence="100")
    shorter = record(when, "f", sequence="99")
    assert fates([longer, shorter]) == ["producer", "kept"]


def test_records_without_an_event_id_are_deduplicated_by_position_only() -> None:
    a = record(f"{D}T10:00:00.000", None, sequence="1", data=b"1")
    b = record(f"{D}T10:00:00.500", None, sequence="2", data=b"1")
    assert fates([a, b]) == ["kept", "kept"]


def test_copies_before_the_window_count() -> None:
    """A retry in the window whose original lies before it is dropped; the original is
    not the window's to publish."""
    original = record("2026-11-20T23:30:00.000", "e", sequence="1")
    retry = record(f"{D}T00:10:00.000", "e", sequence="2")
    found = truth(readout(original, retry), D)
    assert found.rows == []
    assert set(found.hours) == {f"{D}T00"}
    assert found.hours[f"{D}T00"].producer == 1


def test_rows_belong_to_the_hour_of_their_object() -> None:
    late = record(
        f"{D}T06:59:59.999",
        "e",
        rel=f"dt={D}/hour=07/minute=00/shard=shardId-000000000000/1-1.jsonl.gz",
        data=b'"x"',
    )
    assert truth(readout(late), f"{D}T06").rows == []
    found = truth(readout(late), f"{D}T07")
    assert [row.data for row in found.rows] == [b'"x"']
    assert found.payload_bytes == 3


def test_reading_lines_that_are_not_records(tmp_path: Path) -> None:
    """Malformed lines are counted per hour; blank lines skipped; data sliced verbatim."""
    good = (
        b'{"stream":"orders","shard_id":"s","sequence_number":"7","subsequence_number":0,'
        b'"partition_key":"k,\\"data\\":","arrival_ts":"2026-11-21T05:00:00.000Z",'
        b'"event_id":null,"data":{"a": 1E+2, "b":"}"}}'
    )
    bad = malformed_variants(good)
    rel = f"dt={D}/hour=05/minute=00/shard=s/7-7.jsonl.gz"
    path = tmp_path / f"stream={STREAM}" / rel
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(b"\n".join([good, b"", b"  ", *bad, good])))
    found = read_archive(tmp_path, STREAM)
    assert found.objects == {rel: "ok"}
    assert found.malformed == {f"{D}T05": len(bad)}
    assert [r.data for r in found.records] == [b'{"a": 1E+2, "b":"}"}'] * 2
    assert found.records[0].event_id is None
    counts = truth(found, D).hours[f"{D}T05"]
    assert (counts.kept, counts.transport, counts.malformed) == (1, 1, len(bad))
    assert read_body(b"plain text") == ("corrupt", [])
    # Another writer's spacing is read, as the Spark job reads it.
    spaced = good.replace(b',"data":', b', "data": ') + b" "
    record = parse_record(spaced, STREAM, rel, f"{D}T05")
    assert record is not None
    assert record.data == b'{"a": 1E+2, "b":"}"}'


def test_a_window_is_a_day_or_an_hour() -> None:
    with pytest.raises(ValueError, match="window"):
        truth(readout(), "2026-11-21T5")


# ---------------------------------------------------------------- properties

_EVENTS = st.one_of(st.none(), st.sampled_from(["a", "b", "c", ""]))
_HORIZONS = st.sampled_from(
    [
        timedelta(0),
        timedelta(milliseconds=1),
        timedelta(minutes=10),
        H,
        timedelta(hours=20),
        ONE_DAY,
    ]
)
# Arrivals over two days, on a coarse grid so that ties and exact horizons happen.
_SENDS = st.lists(
    st.tuples(
        st.integers(0, 2),  # shard
        _EVENTS,
        st.integers(0, 2 * 24 * 6 - 1).map(lambda slot: slot * 600_000),  # 10-minute slots
        st.sampled_from([0, 1, 599_999]),  # ms into the slot
        st.integers(1, 3),  # copies
    ),
    max_size=40,
)


def _records(sends: list[tuple[int, str | None, int, int, int]]) -> list[Record]:
    """Records of ``sends``: per shard, sequence numbers grow with arrival (9, 10, 11, ...
    so their lengths differ), every copy in an object of its own in the minute's folder."""
    base = millis(f"{D}T00:00:00.000") - 86_400_000
    found = []
    for shard in range(3):
        mine = [(slot + ms, event, n) for s, event, slot, ms, n in sends if s == shard]
        mine.sort(key=lambda send: send[0])
        for k, (offset, event, copies) in enumerate(mine):
            ms = base + offset
            when = format_ts(EPOCH + timedelta(milliseconds=ms))
            folder = f"dt={when[:10]}/hour={when[11:13]}/minute={when[14:16]}/shard=s{shard}"
            sequence = str(9 + k)
            data = json.dumps(event).encode()
            for copy in range(copies):
                rel = f"{folder}/{sequence}-{sequence}{'x' * copy}.jsonl.gz"
                hour = hour_of_rel(rel)
                found.append(
                    Record(f"s{shard}", sequence, 0, ms, event, data, len(data), rel, hour)
                )
    return found


@given(_SENDS, _HORIZONS)
def test_a_day_is_the_union_of_its_hours(
    sends: list[tuple[int, str | None, int, int, int]], horizon: timedelta
) -> None:
    records = _records(sends)
    everything = readout(*records)
    for day in sorted({record.hour[:10] for record in records}):
        whole = truth(everything, day, horizon)
        hours = [truth(everything, f"{day}T{hour:02d}", horizon) for hour in range(24)]
        assert whole.rows == sorted(
            (row for part in hours for row in part.rows),
            key=lambda row: (row.shard_id, len(row.sequence_number), *row[1:3]),
        )
        assert whole.hours == {h: c for part in hours for h, c in part.hours.items()}
        assert whole.payload_bytes == sum(part.payload_bytes for part in hours)
        assert whole.records == sum(1 for record in records if record.hour[:10] == day)


@given(_SENDS, _HORIZONS)
def test_an_hour_needs_only_the_horizon_before_it(
    sends: list[tuple[int, str | None, int, int, int]], horizon: timedelta
) -> None:
    """Judged with only its own objects and those of the hours of the horizon before it,
    an hour comes out as with everything visible (what a compaction's lookback relies on)."""
    records = _records(sends)
    everything = readout(*records)
    for hour in sorted({record.hour for record in records}):
        start = millis(f"{hour}:00:00.000")
        first = start - horizon // timedelta(milliseconds=1)
        first -= first % 3_600_000
        visible = [r for r in records if first <= r.arrival_ms - r.arrival_ms % 3_600_000 <= start]
        assert truth(readout(*visible), hour, horizon) == truth(everything, hour, horizon)
