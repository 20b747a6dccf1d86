"""The reader jar's header split (``LandedObjectLines$Header``) against ``from_json``.

The compaction splits a line in exactly the lander's form with the jar's function and
parses every other line with ``from_json`` (:func:`sparkjobs.compaction.lines.parse`). The two must
give the same columns for any line, so lines are generated here by hand (not by the
lander's writer): the lander's form with any header values and payloads, and that form
bent every way a writer could bend it (escapes, unicode, blanks, other key orders,
numbers where strings go, big or zero-led integers, fields missing or doubled, no final
brace). Each batch is parsed both ways and compared row by row; the lines in the exact
form must in fact take the function's path.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.archive.envelope import FIELDS as LINE_FIELDS
from consumer.archive.envelope import HEADER, parse_line
from consumer.landing.envelope import Encoder, EventIdPointer
from consumer.sequence import Position
from consumer.stream.records import Record
from sparkjobs.compaction import objectreader
from sparkjobs.compaction.lines import parse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIELDS = HEADER
"""The header fields, in line order (``data`` follows them)."""

TEXT = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12),
    st.text(max_size=8),  # any code point: escapes, unicode, surrogates
    st.sampled_from(["", "0", "shardId-000000000001", "2026-11-21T09:12:00.123Z", ',"data":']),
)
"""Header string values: mostly what the lander writes, and anything else."""

NUMBER = st.one_of(
    st.integers(min_value=0, max_value=10**18),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["007", "0", "00", "1.0", "1e3", "-0", '"5"', "null", "true"]),
)
"""subsequence_number's text (an int is written in JSON; a str as it is)."""

PAYLOAD = st.one_of(
    st.sampled_from(
        [
            '{"a":1}',
            '{ "a" : [1, 2.50, "x"] }',
            '"just a string"',
            '"42"',
            "null",
            "true",
            "1E+2",
            "0.1000000000000000055511151231257827",
            "123456789012345678901234567890",
            '"caf\u00e9 \\u00e9 \\"q\\""',
            "",
            " 7 ",
            '{"data":1},"data":2',
            "[]",
            '"QUJD"',
            "}",
        ]
    ),
    st.text(max_size=10),
)


def _value(draw: st.DrawFn, value: Any) -> str:
    """A header value as JSON: escaped or not (ensure_ascii), or a raw number text."""
    if isinstance(value, str) and value in {"007", "00", "1.0", "1e3", "-0", '"5"', "null", "true"}:
        return value
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def line(draw: st.DrawFn) -> bytes:
    """A line in the lander's form, or bent one way or more."""
    values: dict[str, Any] = {name: draw(TEXT) for name in FIELDS if name != "subsequence_number"}
    values["subsequence_number"] = draw(NUMBER)
    event = draw(st.sampled_from(["absent", "string", "null", "number"]))
    names = [n for n in FIELDS if n != "event_id" or event != "absent"]
    if event == "null":
        values["event_id"] = None
    elif event == "number":
        values["event_id"] = draw(st.integers())
    bend = draw(st.sets(st.sampled_from(["order", "drop", "double", "extra", "blank"]), max_size=2))
    if "order" in bend:
        names = draw(st.permutations(names))
    if "drop" in bend:
        names.remove(draw(st.sampled_from(names)))
    if "double" in bend:
        names.append(draw(st.sampled_from(names)))
    if "extra" in bend:
        names.insert(draw(st.integers(0, len(names))), "other")
        values["other"] = draw(TEXT)
    colon, comma = (": ", ", ") if "blank" in bend else (":", ",")
    head = comma.join(f'"{n}"{colon}{_value(draw, values[n])}' for n in names)
    end = draw(st.sampled_from(["}", "}", "}", "} ", "", " }"]))
    text = "{" + head + f',"data":{draw(PAYLOAD)}' + end
    return text.encode("utf-8", "surrogatepass")


def _parsed(spark: SparkSession, lines: list[bytes], fmt: str, *, fast: bool) -> list[Any]:
    frame = spark.createDataFrame(list(enumerate(lines)), "i int, line binary")
    frame = frame.selectExpr("i", "CAST(line AS STRING) AS value")
    rows = parse(frame, fmt, fast_header=fast).orderBy("i").collect()
    return [row.asDict() for row in rows]


def _quick(spark: SparkSession, lines: list[bytes]) -> list[Any]:
    """The function's own result per line (None where it refuses the line)."""
    frame = spark.createDataFrame(list(enumerate(lines)), "i int, line binary")
    rows = frame.selectExpr("i", f"{objectreader.HEADER}(line) AS h").orderBy("i").collect()
    return [row["h"] for row in rows]


@pytest.fixture(scope="module")
def fast(spark: SparkSession) -> SparkSession:
    assert objectreader.enable_header(spark), "the test session has no header function"
    return spark


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(line(), min_size=50, max_size=150), fmt=st.sampled_from(["json", "raw"]))
@pytest.mark.deep  # ~16 s: the Spark matrix (with and without the function)
def test_any_line_parses_the_same_with_and_without_the_function(
    fast: SparkSession, lines: list[bytes], fmt: str
) -> None:
    assert _parsed(fast, lines, fmt, fast=True) == _parsed(fast, lines, fmt, fast=False)


def _lander_lines() -> list[bytes]:
    """Lines as the lander writes them: json with and without an event id (found, not
    found), a KPL member, raw."""
    arrival = datetime(2026, 11, 21, 9, 12, 0, 123000, tzinfo=UTC)

    def record(data: bytes, position: Position) -> Record:
        return Record("shardId-000000000007", position, "pk-1", data, arrival)

    out = []
    big = Position(49_590_338_271_490_256_608_559_692_538_361_571_095_921_575_989_136_588_898, 0)
    member = Position(big.sequence, 41)
    for encoder, data, position in (
        (Encoder("orders"), b'{"a": 1}', big),
        (Encoder("orders", event_id=EventIdPointer("/id")), b'{"id":"e-1","v":1E+2}', big),
        (Encoder("orders", event_id=EventIdPointer("/id")), b'"no id here"', member),
        (Encoder("orders", "raw"), b"\x00\xffbytes", big),
    ):
        encoded = encoder.encode(record(data, position))
        assert isinstance(encoded, tuple)
        out.append(encoded[0].rstrip(b"\n"))
    return out


def test_lines_the_lander_writes_take_the_functions_path(fast: SparkSession) -> None:
    lines = _lander_lines()
    found = _quick(fast, lines)
    assert all(h is not None for h in found)
    first, with_id, no_id, raw = found
    assert first["stream"] == "orders"
    assert first["sequence_number"] == str(
        49_590_338_271_490_256_608_559_692_538_361_571_095_921_575_989_136_588_898
    )
    assert (first["subsequence_number"], no_id["subsequence_number"]) == (0, 41)
    assert first["event_id"] is None
    assert (with_id["event_id"], no_id["event_id"]) == ("e-1", None)
    assert bytes(with_id["payload"]) == b'{"id":"e-1","v":1E+2}'
    assert bytes(raw["payload"]) == b'"' + base64.b64encode(b"\x00\xffbytes") + b'"'
    for fmt in ("json", "raw"):
        assert _parsed(fast, lines, fmt, fast=True) == _parsed(fast, lines, fmt, fast=False)


def test_the_jars_line_form_is_the_formats_field_list(fast: SparkSession) -> None:
    """A line of every field of consumer/archive/envelope.FIELDS, in its order, takes the
    jar's path and gives each field back: a field added to (or moved in) the format
    fails here until LandedObjectLines.Header knows it."""
    expected: dict[str, Any] = {}
    parts = []
    for field in LINE_FIELDS:
        if field.kind == "json":
            text, expected["payload"] = '{"v":[1,2]}', b'{"v":[1,2]}'
        elif field.kind == "integer":
            text, expected[field.name] = "5", 5
        else:
            value = "12345" if field.name == "sequence_number" else f"v-{field.name}"
            text, expected[field.name] = json.dumps(value), value
        parts.append(f'"{field.name}":{text}')
    line = ("{" + ",".join(parts) + "}").encode()
    assert parse_line(line).data == expected["payload"]  # the format's own reader agrees
    (found,) = _quick(fast, [line])
    assert found is not None, "the jar refuses a line of the format's fields"
    got = found.asDict()
    got["payload"] = bytes(got["payload"])
    assert got == expected


@pytest.mark.parametrize(
    "bent",
    [
        pytest.param(lambda s: s.replace('"pk-1"', '"pk\\u002d1"'), id="an escape"),
        pytest.param(lambda s: s.replace('"pk-1"', '"pk-\u00e9"'), id="unicode"),
        pytest.param(lambda s: s.replace(":41,", ":041,"), id="a leading zero"),
        pytest.param(lambda s: s.replace(":41,", ":1234567890123456789,"), id="19 digits"),
        pytest.param(lambda s: s.replace(":41,", ':"41",'), id="a quoted number"),
        pytest.param(lambda s: s.replace('"stream":', '"stream": '), id="a blank"),
        pytest.param(lambda s: s[:-1], id="no final brace"),
        pytest.param(lambda s: s + " ", id="a blank after it"),
        pytest.param(lambda s: s.replace('"event_id":null', '"event_id":7'), id="an id number"),
        pytest.param(lambda s: s.replace('"stream":"orders",', ""), id="no stream"),
    ],
)
def test_any_other_line_is_left_to_from_json(fast: SparkSession, bent: Any) -> None:
    member = _lander_lines()[2].decode()
    assert '"subsequence_number":41,' in member
    assert '"event_id":null' in member
    changed = bent(member).encode()
    assert changed != member.encode()
    assert _quick(fast, [changed]) == [None]
    assert _parsed(fast, [changed], "json", fast=True) == _parsed(
        fast, [changed], "json", fast=False
    )
