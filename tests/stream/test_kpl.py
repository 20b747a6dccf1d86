"""The KPL aggregation format: round trips, golden bytes, and every way to reject input.

The protobuf fragments here are built by a small encoder written for the tests, so the
golden vectors do not merely check ``consumer.stream.kpl`` against itself. Where
``aws-kinesis-agg`` is installed, its aggregator (the KPL's format ported by AWS) and
its protobuf message classes serve as an independent reference.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from consumer.sequence import Position
from consumer.stream import KinesisRecord
from consumer.stream.kpl import (
    DIGEST_SIZE,
    KPL_DEFAULT_MAX_BYTES,
    MAGIC,
    MAX_RECORD_BYTES,
    KplError,
    UserRecord,
    deaggregate,
    is_aggregated,
)
from consumer.stream.kpl_encode import aggregate, aggregate_chunks
from consumer.stream.records import Record, epoch_us
from consumer.stream.records import user_records as unpack_aggregate

# --- an independent protobuf encoder for hand-built aggregates --------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def ld(field: int, payload: bytes) -> bytes:
    return key(field, 2) + varint(len(payload)) + payload


def vi(field: int, value: int) -> bytes:
    return key(field, 0) + varint(value)


def wrap(body: bytes) -> bytes:
    """A Kinesis record holding ``body`` with the magic and a correct digest."""
    return MAGIC + body + hashlib.md5(body).digest()


def record(pk_index: int, data: bytes, ehk_index: int | None = None) -> bytes:
    inner = vi(1, pk_index) + (b"" if ehk_index is None else vi(2, ehk_index)) + ld(3, data)
    return ld(3, inner)


def reason_of(data: bytes) -> str:
    with pytest.raises(KplError) as caught:
        deaggregate(data)
    return caught.value.reason


# --- strategies --------------------------------------------------------------------------

hash_keys = st.integers(0, 2**128 - 1).map(str)
user_records = st.builds(
    UserRecord,
    partition_key=st.text(max_size=20),
    explicit_hash_key=st.none() | hash_keys | st.text(max_size=5),
    data=st.binary(max_size=300),
)
# Few distinct keys, so that deduplication in the key tables is exercised.
shared_keys = st.sampled_from(["a", "b", "ключ", "🔑", ""])
clustered_records = st.builds(
    UserRecord,
    partition_key=shared_keys,
    explicit_hash_key=st.none() | st.sampled_from(["0", "1", str(2**127)]),
    data=st.binary(max_size=50),
)
record_lists = st.lists(user_records | clustered_records, min_size=1, max_size=30)

_numbers = st.integers(0, 5) | st.integers(0, 2**64 - 1)
_field_numbers = st.integers(1, 40)


def _unknown_field(depth: int = 0) -> st.SearchStrategy[bytes]:
    options = [
        st.builds(vi, _field_numbers, _numbers),
        st.builds(lambda f, b: key(f, 1) + b, _field_numbers, st.binary(min_size=8, max_size=8)),
        st.builds(lambda f, b: key(f, 5) + b, _field_numbers, st.binary(min_size=4, max_size=4)),
        st.builds(ld, _field_numbers, st.binary(max_size=5)),
    ]
    if depth < 2:
        options.append(
            st.builds(
                lambda f, inner: key(f, 3) + b"".join(inner) + key(f, 4),
                _field_numbers,
                st.lists(st.deferred(lambda: _unknown_field(depth + 1)), max_size=2),
            )
        )
    return st.one_of(*options)


_noise = st.binary(max_size=3) | st.builds(key, st.integers(0, 5), st.integers(0, 7))
_record_fields = st.one_of(
    st.builds(vi, st.just(1), _numbers),
    st.builds(vi, st.just(2), _numbers),
    st.builds(ld, st.just(3), st.binary(max_size=5)),
    st.builds(
        lambda k, v: ld(4, ld(1, k) + ld(2, v)), st.binary(max_size=3), st.binary(max_size=3)
    ),
    _unknown_field(),
    _noise,
)
_aggregate_fields = st.one_of(
    st.builds(ld, st.just(1), st.sampled_from([b"a", b"b", "é".encode(), b"\xff", b""])),
    st.builds(ld, st.just(2), st.sampled_from([b"1", b"2"]) | st.binary(max_size=3)),
    st.builds(lambda fs: ld(3, b"".join(fs)), st.lists(_record_fields, max_size=5)),
    st.builds(record, st.integers(0, 2), st.binary(max_size=4)),
    _unknown_field(),
    _noise,
)
#: Protobuf-shaped bodies: mostly well-formed fields, some broken, in any order.
protobuf_bodies = st.lists(_aggregate_fields, max_size=8).map(b"".join)


# --- round trips and golden bytes ----------------------------------------------------


@given(record_lists)
def test_round_trip(records: list[UserRecord]) -> None:
    """deaggregate(aggregate(x)) == x for any records: empty data, unicode partition
    keys, empty keys, with and without explicit hash keys, in order."""
    assert deaggregate(aggregate(records)) == records


@given(st.lists(st.tuples(st.text(max_size=10), st.binary(max_size=50)), min_size=1))
def test_round_trip_from_pairs(pairs: list[tuple[str, bytes]]) -> None:
    """(partition_key, data) pairs encode as records without an explicit hash key."""
    assert deaggregate(aggregate(pairs)) == [UserRecord(pk, None, data) for pk, data in pairs]


def test_encoding_matches_hand_built_bytes() -> None:
    """The encoder writes the key tables deduplicated in first-seen order, then the
    records (pk index, ehk index only when present, data), then the MD5 digest."""
    records = [
        UserRecord("a", None, b"x"),
        UserRecord("b", "7", b""),
        UserRecord("a", "7", b"yz"),
    ]
    body = ld(1, b"a") + ld(1, b"b") + ld(2, b"7") + record(0, b"x")
    body += record(1, b"", 0) + record(0, b"yz", 0)
    assert aggregate(records) == wrap(body)


def test_decodes_hand_built_bytes_with_tags_and_unknown_fields() -> None:
    """Tags and unknown fields of every wire type (varint, fixed64, fixed32,
    length-delimited, nested groups) are skipped at both message levels, and tables
    may come after the records that index them."""
    unknown = vi(9, 300) + key(10, 1) + bytes(8) + key(11, 5) + bytes(4) + ld(12, b"zz")
    group = key(13, 3) + vi(1, 1) + key(14, 3) + ld(2, b"q") + key(14, 4) + key(13, 4)
    tag = ld(4, ld(1, b"k") + ld(2, b"v"))
    first = ld(3, unknown + tag + vi(1, 1) + group + ld(3, b"hello") + tag)
    second = ld(3, ld(3, b"") + vi(2, 0) + vi(1, 0))
    body = first + unknown + group + second + ld(2, b"42") + ld(1, "ü".encode()) + ld(1, b"p")
    assert deaggregate(wrap(body)) == [
        UserRecord("p", None, b"hello"),
        UserRecord("ü", "42", b""),
    ]


@pytest.mark.parametrize("pk_index", [0, 127, 128, 300])
@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 20000])
@pytest.mark.parametrize(
    ("tail", "hash_key"), [(b"", None), (ld(4, ld(1, b"k")), None), (vi(2, 0), "7")]
)
def test_members_at_every_varint_width_decode_as_encoded(
    pk_index: int, size: int, tail: bytes, hash_key: str | None
) -> None:
    """A member's partition key index and data length in one, two or three bytes, with
    or without fields after its data: each decodes to what was encoded (the decoder
    reads one- and two-byte lengths inline, longer ones the general way)."""
    table = b"".join(ld(1, f"k{i}".encode()) for i in range(pk_index + 1))
    payload = (bytes(range(256)) * (size // 256 + 1))[:size]
    member = ld(3, vi(1, pk_index) + ld(3, payload) + tail)
    users = deaggregate(wrap(table + ld(2, b"7") + member + record(0, b"after")))
    assert [(u.partition_key, u.explicit_hash_key, u.data) for u in users] == [
        (f"k{pk_index}", hash_key, payload),
        ("k0", None, b"after"),
    ]


def test_record_without_hash_key_index_has_none() -> None:
    """A record with no explicit_hash_key_index decodes to None even when the table is
    non-empty (aws-kinesis-agg wrongly returns table[0] here)."""
    body = ld(1, b"p") + ld(2, b"99") + record(0, b"a", 0) + record(0, b"b")
    assert [r.explicit_hash_key for r in deaggregate(wrap(body))] == ["99", None]


def test_repeated_scalar_fields_last_one_wins() -> None:
    """A repeated index or data field inside a record takes its last value, as protobuf
    parsers do."""
    body = ld(1, b"p") + ld(1, b"q") + ld(3, vi(1, 0) + ld(3, b"old") + vi(1, 1) + ld(3, b"new"))
    assert deaggregate(wrap(body)) == [UserRecord("q", None, b"new")]


def test_valid_aggregate_without_records_is_empty() -> None:
    """An aggregate whose protobuf holds only key tables decodes to no user records."""
    assert deaggregate(wrap(ld(1, b"p"))) == []


def test_decoded_records_are_ordinary_frozen_user_records() -> None:
    """Records built by the decoder's fast path compare, hash, print and refuse mutation
    exactly like records built by the constructor."""
    built = UserRecord("p", "1", b"d")
    [decoded] = deaggregate(aggregate([built]))
    assert decoded == built
    assert hash(decoded) == hash(built)
    assert repr(decoded) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.data = b"other"  # type: ignore[misc]


def test_aggregate_rejects_no_records() -> None:
    """aggregate([]) raises rather than emit a record that is_aggregated rejects."""
    with pytest.raises(ValueError, match="zero records"):
        aggregate([])


# --- detecting aggregates ------------------------------------------------------------


def test_is_aggregated() -> None:
    """Only data with the magic and a non-empty body between magic and digest counts as
    an aggregate; deaggregate refuses anything else with reason not_aggregated."""
    good = aggregate([("p", b"d")])
    assert is_aggregated(good)
    too_short = MAGIC + hashlib.md5(b"").digest()
    assert len(too_short) == len(MAGIC) + DIGEST_SIZE
    for plain in (b"", b"{}", MAGIC, too_short, b"\x00" + good[1:], good[:3]):
        assert not is_aggregated(plain)
        assert reason_of(plain) == "not_aggregated"


@given(st.binary(min_size=len(MAGIC)))
def test_data_without_magic_is_not_aggregated(data: bytes) -> None:
    """Any data whose first four bytes are not the magic is a plain record."""
    assume(data[: len(MAGIC)] != MAGIC)
    assert not is_aggregated(data)


# --- corruption ----------------------------------------------------------------------

SAMPLE = aggregate(
    [UserRecord("pk-1", None, b"first"), UserRecord("pk-2", "12345", bytes(200))]
    + [UserRecord("pk-1", None, bytes([i])) for i in range(3)]
)


@pytest.mark.parametrize("position", range(len(SAMPLE)))
def test_flipped_byte_is_detected(position: int) -> None:
    """Flipping any byte is caught: in the magic it is no longer an aggregate, in the
    body or digest the checksum fails."""
    corrupt = bytearray(SAMPLE)
    corrupt[position] ^= 0x01
    expected = "not_aggregated" if position < len(MAGIC) else "bad_checksum"
    assert reason_of(bytes(corrupt)) == expected


def test_truncated_at_every_length() -> None:
    """A Kinesis record cut short at any length raises KplError (not_aggregated while
    too short, bad_checksum after), never another exception or a partial result."""
    for length in range(len(SAMPLE)):
        expected = "not_aggregated" if length <= len(MAGIC) + DIGEST_SIZE else "bad_checksum"
        assert reason_of(SAMPLE[:length]) == expected, length


def test_truncated_body_with_valid_digest_at_every_length() -> None:
    """A protobuf body cut short but re-digested (a buggy producer) either raises
    KplError or, when cut exactly between records, yields a prefix of the records;
    never another exception and never a record that was not there."""
    original = deaggregate(SAMPLE)
    body = SAMPLE[len(MAGIC) : -DIGEST_SIZE]
    reasons = set()
    for length in range(1, len(body)):
        try:
            decoded = deaggregate(wrap(body[:length]))
        except KplError as exc:
            reasons.add(exc.reason)
        else:
            assert decoded == original[: len(decoded)], length
    assert "truncated" in reasons


@given(st.binary(min_size=1))
def test_random_body_with_valid_digest(body: bytes) -> None:
    """Arbitrary bytes under a valid magic and digest raise KplError or parse to user
    records; no other exception escapes."""
    try:
        records = deaggregate(wrap(body))
    except KplError:
        return
    assert all(isinstance(r, UserRecord) for r in records)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(protobuf_bodies.filter(bool))
def test_protobuf_shaped_body_with_valid_digest(body: bytes) -> None:
    """Protobuf-shaped bodies (valid and broken fields mixed, which random bytes rarely
    reach) raise KplError or parse to user records whose keys come from the tables."""
    try:
        records = deaggregate(wrap(body))
    except KplError:
        return
    for r in records:
        assert isinstance(r.partition_key, str)
        assert r.explicit_hash_key is None or isinstance(r.explicit_hash_key, str)
        assert isinstance(r.data, bytes)


_BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("pk index past table", ld(1, b"p") + record(1, b"x"), "bad_index"),
    ("pk index with no table", record(0, b"x"), "bad_index"),
    ("ehk index past table", ld(1, b"p") + ld(2, b"1") + record(0, b"x", 1), "bad_index"),
    ("bad index in a later record", ld(1, b"p") + record(0, b"x") + record(5, b"y"), "bad_index"),
    ("partition key not utf-8", ld(1, b"\xff") + record(0, b"x"), "bad_utf8"),
    ("hash key not utf-8", ld(1, b"p") + ld(2, b"\xc3") + record(0, b"x", 0), "bad_utf8"),
    ("utf-8 surrogate", ld(1, b"\xed\xa0\x80") + record(0, b"x"), "bad_utf8"),
    ("missing pk index", ld(1, b"p") + ld(3, ld(3, b"x")), "missing_field"),
    ("missing data", ld(1, b"p") + ld(3, vi(1, 0)), "missing_field"),
    ("records as varint", ld(1, b"p") + vi(3, 1), "bad_protobuf"),
    ("key table as fixed32", key(1, 5) + b"abcd", "bad_protobuf"),
    ("data as varint", ld(1, b"p") + ld(3, vi(1, 0) + vi(3, 1)), "bad_protobuf"),
    ("pk index as bytes", ld(1, b"p") + ld(3, ld(1, b"\x00") + ld(3, b"x")), "bad_protobuf"),
    ("tags as varint", ld(1, b"p") + ld(3, vi(1, 0) + ld(3, b"x") + vi(4, 0)), "bad_protobuf"),
    ("field number zero", ld(1, b"p") + b"\x00\x00", "bad_protobuf"),
    ("wire type 6", ld(1, b"p") + key(9, 6), "bad_protobuf"),
    ("stray end group", ld(1, b"p") + key(9, 4), "bad_protobuf"),
    ("mismatched end group", key(9, 3) + key(8, 4), "bad_protobuf"),
    ("groups nested too deep", b"".join(key(9, 3) for _ in range(40)), "bad_protobuf"),
    ("varint of 11 bytes", vi(9, 0)[:1] + b"\x80" * 10 + b"\x00", "bad_protobuf"),
    ("varint over 64 bits", vi(9, 0)[:1] + b"\xff" * 9 + b"\x02", "bad_protobuf"),
    ("length past end", key(1, 2) + b"\x05p", "truncated"),
    ("record length past end", key(3, 2) + varint(300) + b"\x08\x00", "truncated"),
    ("data past its record", ld(1, b"p") + ld(3, vi(1, 0) + key(3, 2) + b"\x09x"), "truncated"),
    ("varint cut off", ld(1, b"p") + key(9, 0) + b"\x80", "truncated"),
    # A data length whose first byte, read alone, would end the data exactly at the
    # member's end: the length runs on, past ten bytes.
    (
        "data length of 11 bytes",
        ld(1, b"p") + ld(3, vi(1, 0) + b"\x1a\x80" + b"\xff" * 128),
        "bad_protobuf",
    ),
    ("key cut off", ld(1, b"p") + b"\x80", "truncated"),
    ("fixed64 cut off", key(9, 1) + b"abc", "truncated"),
    ("unterminated group", key(9, 3) + vi(1, 1), "truncated"),
]


@pytest.mark.parametrize(
    ("body", "reason"), [(b, r) for _, b, r in _BAD_BODIES], ids=[i for i, _, _ in _BAD_BODIES]
)
def test_malformed_aggregate_reason(body: bytes, reason: str) -> None:
    """Each kind of malformed aggregate under a valid digest raises KplError with its
    own machine-readable reason, and nothing is returned for the good records."""
    assert reason_of(wrap(body)) == reason


def test_error_is_a_value_error_with_reason_in_message() -> None:
    """KplError is a ValueError whose message starts with its reason."""
    with pytest.raises(ValueError, match=r"^bad_index: record 0"):
        deaggregate(wrap(record(0, b"x")))


# --- splitting into aggregates ---------------------------------------------------------


@given(record_lists, st.integers(400, 3000))
def test_aggregate_chunks(records: list[UserRecord], max_bytes: int) -> None:
    """Chunks keep order, each is at most max_bytes, each is put under its first
    record's keys, and packing is greedy: the next record would not have fit."""
    chunks = aggregate_chunks(records, max_bytes)
    decoded = [deaggregate(chunk.data) for chunk in chunks]
    assert [r for chunk in decoded for r in chunk] == records
    start = 0
    for chunk, members in zip(chunks, decoded, strict=True):
        assert len(chunk.data) <= max_bytes
        assert chunk.record_count == len(members)
        assert (chunk.partition_key, chunk.explicit_hash_key) == (
            members[0].partition_key,
            members[0].explicit_hash_key,
        )
        start += len(members)
        if start < len(records):
            assert len(aggregate([*members, records[start]])) > max_bytes


def test_aggregate_chunks_at_kpl_default() -> None:
    """1000 records of 200 bytes split at the KPL default of 51200 bytes fill every
    aggregate but the last to within one record of the limit."""
    records = [UserRecord(f"pk-{i}", None, bytes(200)) for i in range(1000)]
    chunks = aggregate_chunks(records)
    assert sum(chunk.record_count for chunk in chunks) == 1000
    assert all(
        KPL_DEFAULT_MAX_BYTES - 300 < len(c.data) <= KPL_DEFAULT_MAX_BYTES for c in chunks[:-1]
    )


def test_aggregate_chunks_rejects_impossible_limits() -> None:
    """A record too big for an aggregate on its own, or a limit above the Kinesis record
    maximum, raises ValueError instead of emitting an oversized record."""
    with pytest.raises(ValueError, match="record 1 needs"):
        aggregate_chunks([("a", b"x"), ("b", bytes(100))], max_bytes=100)
    with pytest.raises(ValueError, match="exceeds the Kinesis limit"):
        aggregate_chunks([("a", b"x")], max_bytes=MAX_RECORD_BYTES + 1)
    assert aggregate_chunks([]) == []


# --- cross-checks against aws-kinesis-agg (skipped when it is not installed) ----------


def _reference_aggregate(agg_module: Any, records: Sequence[UserRecord]) -> bytes:
    aggregator = agg_module.RecordAggregator(max_size=MAX_RECORD_BYTES)
    for r in records:
        assert aggregator.add_user_record(r.partition_key, r.data, r.explicit_hash_key) is None
    blob: bytes = aggregator.clear_and_get().get_contents()[2]
    return blob


def _reference_deaggregate(deagg_module: Any, data: bytes) -> list[dict[str, Any]]:
    raw = {
        "Data": data,
        "SequenceNumber": "1",
        "PartitionKey": "o",
        "ApproximateArrivalTimestamp": 0,
    }
    return [r["kinesis"] for r in deagg_module.iter_deaggregate_records(raw, data_format="Boto3")]


# The reference treats an empty explicit hash key as none; real ones are decimal numbers.
reference_records = st.lists(
    st.builds(UserRecord, st.text(max_size=20), st.none() | hash_keys, st.binary(max_size=300))
    | clustered_records,
    min_size=1,
    max_size=30,
)


@given(reference_records)
def test_reference_aggregates_decode_identically(records: list[UserRecord]) -> None:
    """Aggregates built by aws-kinesis-agg decode with ours to the same records, and
    ours encode to exactly the same bytes."""
    agg_module = pytest.importorskip("aws_kinesis_agg.aggregator")
    theirs = _reference_aggregate(agg_module, records)
    assert deaggregate(theirs) == records
    assert aggregate(records) == theirs


@given(reference_records)
def test_our_aggregates_decode_with_reference(records: list[UserRecord]) -> None:
    """aws-kinesis-agg decodes our aggregates to the same partition keys, data and
    subsequence numbers (explicit hash keys compared only where set, since it
    misreports absent ones when the table is non-empty)."""
    deagg_module = pytest.importorskip("aws_kinesis_agg.deaggregator")
    decoded = _reference_deaggregate(deagg_module, aggregate(records))
    assert len(decoded) == len(records)
    for index, (theirs, ours) in enumerate(zip(decoded, records, strict=True)):
        assert theirs["aggregated"] is True
        assert theirs["subSequenceNumber"] == index
        assert theirs["partitionKey"] == ours.partition_key
        assert base64.b64decode(theirs["data"]) == ours.data
        if ours.explicit_hash_key is not None:
            assert theirs["explicitHashKey"] == ours.explicit_hash_key


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(protobuf_bodies.filter(bool))
def test_agrees_with_protobuf_reference_parser(body: bytes) -> None:
    """Against the protobuf runtime's parse of the same schema: whatever we accept it
    parses to the same records, and whatever it rejects as malformed we reject too (we
    are stricter, never laxer)."""
    deagg_module = pytest.importorskip("aws_kinesis_agg.deaggregator")
    decode_error = pytest.importorskip("google.protobuf.message").DecodeError
    parse: Callable[[bytes], Any] = deagg_module.messages_pb2.AggregatedRecord.FromString
    try:
        reference = parse(body)
    except decode_error:
        reference = None
    try:
        ours = deaggregate(wrap(body))
    except KplError:
        return
    assert reference is not None
    assert reference.IsInitialized()
    pks, ehks = reference.partition_key_table, reference.explicit_hash_key_table
    expected = [
        UserRecord(
            pks[r.partition_key_index],
            ehks[r.explicit_hash_key_index] if r.HasField("explicit_hash_key_index") else None,
            r.data,
        )
        for r in reference.records
    ]
    assert ours == expected


# --- the reader's user records ------------------------------------------------------


def test_a_user_record_has_a_dataclass_value_semantics() -> None:
    """``Record`` is a plain class (a compiled build runs a dataclass's ``__init__`` in
    the interpreter); processors still get equality by value, no hash, and a repr."""
    arrival = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    record = Record("shardId-0", Position(5, 1), "pk", b"{}", arrival)
    assert record == Record("shardId-0", Position(5, 1), "pk", b"{}", arrival)
    assert not record != Record("shardId-0", Position(5, 1), "pk", b"{}", arrival)  # noqa: SIM202
    assert record != Record("shardId-0", Position(5, 2), "pk", b"{}", arrival)
    assert record != Record("shardId-0", Position(5, 1), "pk", b"{}", arrival, error="x")
    assert record != ("shardId-0", Position(5, 1))
    with pytest.raises(TypeError):
        hash(record)
    assert repr(record) == (
        "Record(shard_id='shardId-0', position=Position(sequence=5, subsequence=1), "
        "partition_key='pk', data=b'{}', arrival=datetime.datetime(2026, 11, 26, 12, 0, "
        "tzinfo=datetime.timezone.utc), explicit_hash_key=None, error=None, arrival_us=-1)"
    )
    assert record.micros() == record.arrival_us == epoch_us(arrival)


@given(record_lists, st.integers(0, 2**128), st.integers(0, 10**6))
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
def test_user_records_of_an_aggregate_keep_their_order_keys_and_data(
    records: list[UserRecord], sequence: int, millis: int
) -> None:
    arrival = datetime(2026, 11, 26, tzinfo=UTC) + timedelta(milliseconds=millis)
    kinesis = KinesisRecord(sequence, "outer", aggregate(records), arrival)
    users = unpack_aggregate("shardId-7", kinesis)
    assert [(u.partition_key, u.explicit_hash_key, u.data) for u in users] == [
        (r.partition_key, r.explicit_hash_key, r.data) for r in records
    ]
    assert [u.position for u in users] == [Position(sequence, i) for i in range(len(records))]
    assert {(u.shard_id, u.arrival, u.arrival_us, u.error) for u in users} == {
        ("shardId-7", arrival, epoch_us(arrival), None)
    }
