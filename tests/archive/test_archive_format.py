"""The archive format pinned: the lander's writer against the format's reader.

consumer/archive defines the key layout and the landed line once; the lander writes
them with its own fast code, the Spark jobs, the demo and the tests read them through
the definitions. These properties hold the two sides together, so a drift shows here
and not only in an end-to-end Spark run.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from consumer.archive import envelope, layout, reader
from consumer.archive.envelope import LandedLine, encode_line, format_ts, parse_line
from consumer.landing.envelope import DeadLetter, Encoder, EventIdPointer
from consumer.sequence import Position
from consumer.stream.records import Record

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)

names = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_."),
    min_size=1,
    max_size=20,
)
positions = st.builds(
    Position, st.integers(min_value=0, max_value=10**56), st.integers(min_value=0, max_value=99)
)
minutes = st.integers(min_value=0, max_value=60 * 24 * 365 * 20).map(
    lambda m: EPOCH + timedelta(minutes=m)
)
arrivals = st.integers(min_value=0, max_value=10**12).map(
    lambda ms: EPOCH + timedelta(milliseconds=ms)
)
# Any JSON value a producer may send: big integers, floats, unicode, nesting, null.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
spellings = st.sampled_from(
    [
        json.dumps,
        lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False),
        lambda v: " " + json.dumps(v, indent=2) + "\t",
    ]
)


@given(names, names, minutes, positions, positions)
def test_keys_round_trip(
    stream: str, shard: str, minute: datetime, a: Position, b: Position
) -> None:
    """object_key and parse_key are inverses; the relative key and its hour agree."""
    first, last = min(a, b), max(a, b)
    key = layout.object_key("p/q", stream, shard, minute, first=first, last=last)
    parsed = layout.parse_key(key)
    assert parsed == layout.LandedKey(stream, shard, minute, first, last)
    relative = layout.parse_relative("s3a://bucket/" + key)
    assert relative is not None
    assert relative.minute == minute
    assert layout.hour_of(key) == minute.replace(minute=0)
    assert key.startswith(f"p/q/{layout.stream_folder(stream)}/{layout.minute_folder(minute)}/")


def _record(shard: str, position: Position, key: str, arrival: datetime, data: bytes) -> Record:
    return Record(shard_id=shard, position=position, partition_key=key, data=data, arrival=arrival)


@given(
    stream=names,
    shard=names,
    position=positions,
    partition_key=st.text(min_size=1, max_size=30),
    arrival=arrivals,
    value=json_values,
    spell=spellings,
)
def test_the_landers_lines_read_back_with_the_payload_as_sent(
    *,
    stream: str,
    shard: str,
    position: Position,
    partition_key: str,
    arrival: datetime,
    value: object,
    spell: object,
) -> None:
    """Whatever JSON a producer sends (any value, any spelling), the lander's line
    parses with the format's parser to the same fields, and data is the payload's
    bytes as sent (a multi-line payload has its CR/LF blanked, nothing else)."""
    payload = spell(value).encode()  # type: ignore[operator]
    encoder = Encoder(stream, "json", EventIdPointer("/id"))
    encoded = encoder.encode(_record(shard, position, partition_key, arrival, payload))
    assert not isinstance(encoded, DeadLetter)
    line, event_id = encoded
    read = parse_line(line)
    expected_data = payload.replace(b"\r", b" ").replace(b"\n", b" ").strip()
    assert read == LandedLine(
        stream=stream,
        shard_id=shard,
        sequence_number=str(position.sequence),
        subsequence_number=position.subsequence,
        partition_key=partition_key,
        arrival_ts=format_ts(arrival),
        event_id=event_id,
        data=expected_data,
        has_event_id=True,
    )
    assert json.loads(read.data) == json.loads(payload)
    reference = encode_line(
        stream=stream,
        shard_id=shard,
        sequence_number=position.sequence,
        subsequence_number=position.subsequence,
        partition_key=partition_key,
        arrival_ts=format_ts(arrival),
        data=expected_data,
        event_id=event_id,
        with_event_id=True,
    )
    assert parse_line(reference) == read


@given(names, positions, arrivals, st.binary(max_size=64), st.booleans())
def test_raw_mode_lines_carry_base64_and_fields_in_the_formats_order(
    shard: str, position: Position, arrival: datetime, data: bytes, with_pointer: bool
) -> None:
    """In raw mode data is the payload's base64 string; the line's fields come in
    the order envelope.FIELDS gives (event_id only with a pointer), data last."""
    encoder = Encoder("s", "raw", EventIdPointer("/id") if with_pointer else None)
    encoded = encoder.encode(_record(shard, position, "k", arrival, data))
    assert not isinstance(encoded, DeadLetter)
    line, _ = encoded
    read = parse_line(line)
    assert base64.b64decode(json.loads(read.data)) == data
    order = list(json.loads(line))
    expected = [n for n in envelope.NAMES if with_pointer or n != "event_id"]
    assert order == expected
    assert order[-1] == envelope.DATA


def test_not_landed_lines_are_refused() -> None:
    """Lines that are not the format's fail with LineError, naming why."""
    good = encode_line(
        stream="s",
        shard_id="a",
        sequence_number=1,
        subsequence_number=0,
        partition_key="k",
        arrival_ts="2026-11-22T06:00:00.000Z",
        data=b"{}",
    )
    assert parse_line(good).data == b"{}"
    for bad in (
        b"not json\n",
        b'{"data":1}\n',
        good.replace(b'"subsequence_number":0', b'"subsequence_number":"0"'),
        good.replace(b'"sequence_number":"1"', b'"sequence_number":"x1"'),
        good.replace(b'"stream":"s","shard_id":"a"', b'"shard_id":"a","stream":"s"'),
        good[: good.index(b',"data"')] + b"}\n",
    ):
        try:
            parse_line(bad)
        except envelope.LineError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_the_spark_schema_is_the_field_list() -> None:
    """The Spark jobs read landed lines with a schema derived from the same fields."""
    from sparkjobs.table.schema import CORRUPT, LANDED

    assert LANDED.fieldNames() == [*envelope.NAMES, CORRUPT]


def test_the_test_archive_generator_writes_the_format(tmp_path: Path) -> None:
    """bench/archives.py writes its lines with its own fast code, apart from the
    lander's: every line it lands reads back through the format's reader."""
    from datetime import date

    from bench.archives import generate_archive

    truth = generate_archive(
        tmp_path,
        day=date(2026, 11, 22),
        hours=[6],
        shards=2,
        records_per_minute=5,
        records_per_file=3,
        aggregated_share=0.3,
        producer_duplicate_share=0.1,
    )
    objects = list(reader.read_archive(tmp_path, "orders"))
    assert objects
    lines = [line for landed in objects for line in landed.lines]
    assert all(line.has_event_id and line.stream == "orders" for line in lines)
    assert all(json.loads(line.data) is not None for line in lines)
    assert truth is not None
