"""The lander's JSON-protocol parser returns what botocore's returns, for any body.

:mod:`consumer.stream.fastparse` walks lists of flat structures (Kinesis' records) with a plan
made once per shape. Here it is held equal to aiobotocore's own parser, given
the same timestamp parser: on random GetRecords bodies (records of any bytes and keys,
unknown members, nulls, values of the wrong type, invalid base64), on random JSON
against the output shapes of the Kinesis and DynamoDB calls the worker makes, and on
number texts at the edges of what JSON readers read differently. "Equal" is the same
types and values (1 is not 1.0 is not True), or the same exception.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from typing import Any

import botocore.session
import pytest
from aiobotocore.parsers import AioJSONParser
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.aws import epoch_timestamp
from consumer.stream.eventstream import TolerantJSONParser
from consumer.stream.fastparse import FastJSONParsing, b64decode
from consumer.stream.kinesis import to_record

_MODELS = botocore.session.get_session()
KINESIS = _MODELS.get_service_model("kinesis")
DYNAMODB = _MODELS.get_service_model("dynamodb")
SHAPES: list[Any] = [
    KINESIS.operation_model(name).output_shape
    for name in ("GetRecords", "ListShards", "DescribeStreamSummary", "ListStreams")
] + [
    DYNAMODB.operation_model(name).output_shape
    for name in ("GetItem", "Query", "Scan", "BatchWriteItem", "UpdateItem")
]
GET_RECORDS: Any = KINESIS.operation_model("GetRecords").output_shape


def parse(parser: Any, body: bytes, shape: Any) -> Any:
    """The parsed response, or ``("raised", type, message)``."""
    response = {
        "body": body,
        "headers": {},
        "status_code": 200,
        "context": {"operation_name": "GetRecords"},
    }
    return parse_with(parser, response, shape)


def parse_with(parser: Any, response: dict[str, Any], shape: Any) -> Any:
    try:
        return asyncio.run(parser.parse(response, shape))
    except Exception as exc:  # the failure is the value compared
        return ("raised", type(exc), str(exc))


def both(body: bytes, shape: Any) -> tuple[Any, Any]:
    ours = TolerantJSONParser(timestamp_parser=epoch_timestamp)
    theirs = AioJSONParser(timestamp_parser=epoch_timestamp)
    return parse(ours, body, shape), parse(theirs, body, shape)


def same(a: Any, b: Any) -> bool:
    """Equal values of exactly the same types, NaN equal to NaN, -0.0 not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.from_regex(r"\A[0-9]{1,60}\Z")
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def dumps(value: Any, ascii_only: bool) -> bytes:
    """JSON text as a service might send it; a lone surrogate stays an invalid byte."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


records = st.fixed_dictionaries(
    {
        "SequenceNumber": st.from_regex(r"\A[0-9]{1,60}\Z"),
        "ApproximateArrivalTimestamp": st.floats(0, 4e9) | st.integers(0, 2**32),
        "Data": st.binary(max_size=64).map(lambda raw: base64.b64encode(raw).decode()),
        "PartitionKey": st.text(max_size=12),
    },
    optional={
        "EncryptionType": st.sampled_from(["NONE", "KMS"]),
        "ExplicitHashKey": st.from_regex(r"\A[0-9]{1,39}\Z"),
        "SomethingNew": json_values,
    },
)
odd_records = records.flatmap(
    lambda record: st.sampled_from(sorted(record)).flatmap(
        lambda key: json_values.map(lambda value: {**record, key: value})
    )
)
"""A record with one member of any JSON value: wrong types, nulls, bad base64."""


@settings(max_examples=300)
@given(
    items=st.lists(records | odd_records | json_values, max_size=6),
    extra=st.dictionaries(st.sampled_from(["NextShardIterator", "MillisBehindLatest"]), scalars),
    ascii_only=st.booleans(),
)
def test_get_records_bodies_parse_as_botocore_parses_them(
    items: list[Any], extra: dict[str, Any], ascii_only: bool
) -> None:
    """Any GetRecords body, good records or not: the same records, or the same error."""
    ours, theirs = both(dumps({"Records": items, **extra}, ascii_only), GET_RECORDS)
    assert same(ours, theirs), (ours, theirs)


@settings(max_examples=300)
@given(value=json_values, shape=st.sampled_from(SHAPES), ascii_only=st.booleans())
def test_any_json_against_the_workers_shapes_parses_as_botocore(
    value: Any, shape: Any, ascii_only: bool
) -> None:
    """Kinesis and DynamoDB outputs (lists of structures, maps, nested lists, attribute
    values): whatever the body holds, the same result."""
    ours, theirs = both(dumps(value, ascii_only), shape)
    assert same(ours, theirs), (ours, theirs)


@given(
    st.from_regex(r"\A-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][+-]?[0-9]{1,4})?\Z")
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0"])
)
def test_numbers_read_to_the_same_values(text: str) -> None:
    """Big integers, long mantissas, overflow and underflow: what json.loads reads."""
    body = b'{"MillisBehindLatest": %s, "Records": []}' % text.encode()
    ours, theirs = both(body, GET_RECORDS)
    assert same(ours, theirs), (text, ours, theirs)


@given(st.binary(max_size=40))
def test_any_bytes_as_a_body(body: bytes) -> None:
    """Invalid UTF-8, truncated JSON, an empty body: the same value or failure."""
    ours, theirs = both(body, GET_RECORDS)
    assert same(ours, theirs), (ours, theirs)


@given(st.text(max_size=40) | st.binary(max_size=40) | st.integers())
def test_blob_decoding_is_base64_b64decode(value: Any) -> None:
    """The blob fast path: botocore's ``base64.b64decode``, value or exception."""

    def run(decode: Any) -> Any:
        try:
            return decode(value)
        except Exception as exc:
            return ("raised", type(exc), str(exc))

    assert same(run(b64decode), run(base64.b64decode))


def test_the_fast_path_is_taken_for_records() -> None:
    """Kinesis' Record is walked by a plan; lists of nested structures are not."""
    parser = TolerantJSONParser(timestamp_parser=epoch_timestamp)
    record_shape = GET_RECORDS.members["Records"].member
    plan = parser._plan(record_shape)
    assert plan is not None
    assert [step[0] for step in plan] == list(record_shape.members)
    shards = SHAPES[1].members["Shards"].member
    assert shards.name == "Shard"
    assert parser._plan(shards) is None  # HashKeyRange is a structure


@given(records)
def test_parsed_records_become_kinesis_records(raw: dict[str, Any]) -> None:
    """Every field where the reader expects it. GetRecords' ``Record`` shape has no
    explicit hash key (only PutRecord takes one), so botocore drops it, as do we."""
    ours, _ = both(dumps({"Records": [raw]}, ascii_only=True), GET_RECORDS)
    record = to_record(ours["Records"][0])
    assert record.sequence == int(raw["SequenceNumber"])
    assert record.partition_key == raw["PartitionKey"]
    assert record.data == base64.b64decode(raw["Data"])
    assert record.arrival == epoch_timestamp(raw["ApproximateArrivalTimestamp"])
    assert record.explicit_hash_key is None


def test_a_record_without_a_sequence_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kinesis sequence number"):
        to_record({"SequenceNumber": "12a", "PartitionKey": "k", "Data": b"", "Arrival": 0})


_SUBSCRIBE: Any = KINESIS.operation_model("SubscribeToShard").output_shape
EVENTS: Any = _SUBSCRIBE.members["EventStream"]


@settings(max_examples=100)
@given(items=st.lists(records | odd_records, max_size=4), ascii_only=st.booleans())
def test_subscribe_to_shard_events_parse_as_botocore_parses_them(
    items: list[Any], ascii_only: bool
) -> None:
    """Enhanced fan-out: the event-stream parser the lander's clients use walks an
    event's records the same way, to the same values."""
    ours = TolerantJSONParser(timestamp_parser=epoch_timestamp)._event_stream_parser
    stock: Any = AioJSONParser(timestamp_parser=epoch_timestamp)
    theirs = stock._event_stream_parser
    assert isinstance(ours, FastJSONParsing)
    assert not isinstance(theirs, FastJSONParsing)
    body = dumps(
        {"Records": items, "ContinuationSequenceNumber": "1", "MillisBehindLatest": 0}, ascii_only
    )
    response = {
        "body": body,
        "headers": {":event-type": "SubscribeToShardEvent", ":message-type": "event"},
        "status_code": 200,
    }
    found = [parse_with(parser, response, EVENTS) for parser in (ours, theirs)]
    assert "SubscribeToShardEvent" in str(found[1]) or found[1][0] == "raised"
    assert same(*found), found
