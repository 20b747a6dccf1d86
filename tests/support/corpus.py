"""The bad-input corpus: what a producer can put on a stream, as data.

Each :class:`Case` is one Kinesis record (its data exactly as put, its partition key,
whether it is or was a KPL aggregate) and what must become of each of its user records
under ``LANDER_PAYLOAD_FORMAT=json`` and ``raw``, with ``LANDER_EVENT_ID_POINTER`` set
to :data:`POINTER`: landed as JSON, landed as base64, or dead-lettered with a reason.
Whatever the case, the shard moves on and the record is counted.

The reasons are the lander's own strings: ``invalid JSON``, ``not UTF-8`` and ``empty payload`` from
``consumer/landing/envelope.py`` (``Encoder.encode``), and ``kpl_<reason>`` from
``consumer/stream/records.py`` (``user_records``) with ``<reason>`` one of
:data:`consumer.stream.kpl.KplReason`. A case whose right outcome the code does not produce
yet carries ``xfail``: the reason, and the fix it needs.

docs/landing.md ("Bad input") tabulates this module; keep the two in step.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from consumer.stream.kpl import MAGIC, KplReason, UserRecord
from consumer.stream.kpl_encode import aggregate

Mode = Literal["json", "raw"]
MODES: tuple[Mode, ...] = ("json", "raw")

POINTER = "/event_id"
"""The event-id pointer every corpus run uses (``LANDER_EVENT_ID_POINTER``)."""

MAX_RECORD = 1024 * 1024
"""Kinesis's classic record limit: data plus partition key (kinesalite checks only
the data, at the same size)."""

INVALID_JSON = "invalid JSON"
NOT_UTF8 = "not UTF-8"
"""Prefix of the reason for a payload orjson rejects (``Encoder.encode``)."""
EMPTY_PAYLOAD = "empty payload"
"""The reason for a zero-length payload in json mode (``Encoder.encode``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What must become of one user record."""

    kind: Literal["json", "raw", "dead"]
    reason: str = ""
    """Dead letters: how the reason starts."""
    event_id: str | None = None
    """Landed lines: the ``event_id`` the line carries (raw mode never reads one)."""


JSON = Outcome("json")
RAW = Outcome("raw")


def dead(reason: str) -> Outcome:
    """A dead letter whose reason starts with ``reason``."""
    return Outcome("dead", reason)


def kpl(reason: KplReason) -> Outcome:
    """The dead letter of a Kinesis record that has the KPL magic but does not decode."""
    return dead(f"kpl_{reason}")


@dataclass(frozen=True, slots=True)
class Case:
    """One Kinesis record of the corpus and what must become of it."""

    name: str
    data: bytes
    """The Kinesis record's data, exactly as put."""
    json: tuple[Outcome, ...]
    """Outcome of each user record, in subsequence order, with payload format json."""
    raw: tuple[Outcome, ...]
    """The same with payload format raw."""
    partition_key: str = "k"
    """The Kinesis record's partition key."""
    aggregated: bool = False
    """The data is a KPL aggregate built by ``consumer.stream.kpl_encode.aggregate``
    (maybe damaged)."""
    records: tuple[tuple[str, bytes], ...] = ()
    """(partition key, data) of each user record as the lander sees it, when that is
    not the whole Kinesis record (a valid aggregate)."""
    xfail: str | None = None
    """Why the code does not do the right thing yet (and what would fix it)."""
    xfail_modes: tuple[Mode, ...] = MODES
    """The payload formats ``xfail`` applies to."""
    note: str = ""
    """For the table in docs/landing.md."""

    def __post_init__(self) -> None:
        assert len(self.json) == len(self.raw) == len(self.user_records), self.name

    @property
    def user_records(self) -> tuple[tuple[str, bytes], ...]:
        """(partition key, data) per user record; subsequence = index."""
        return self.records or ((self.partition_key, self.data),)

    def broken(self, mode: Mode) -> str | None:
        """Why the code gets this case wrong under ``mode`` (None: it gets it right)."""
        return self.xfail if mode in self.xfail_modes else None

    def outcomes(self, mode: Mode) -> tuple[Outcome, ...]:
        """The outcome of each user record under ``mode``."""
        return self.json if mode == "json" else self.raw

    def count(self, mode: Mode, kind: str) -> int:
        """How many of its user records end as ``kind`` (json, raw, dead)."""
        return sum(outcome.kind == kind for outcome in self.outcomes(mode))


def good(number: int) -> Case:
    """The well-formed record put after a case, on the same shard: it must land."""
    event_id = f"good-{number}"
    data = json.dumps({"event_id": event_id, "good": number}).encode()
    return Case(
        f"good {number}",
        data,
        (Outcome("json", event_id=event_id),),
        (RAW,),
        partition_key=event_id,
    )


# -- building the cases --------------------------------------------------------------


def _payload(
    data: bytes,
    *,
    name: str,
    key: str = "k",
    event_id: str | None = None,
    note: str = "",
    xfail: str | None = None,
    xfail_modes: tuple[Mode, ...] = MODES,
) -> Case:
    """A payload that json mode lands as JSON (with ``event_id``) and raw mode as base64."""
    return Case(
        name,
        data,
        (Outcome("json", event_id=event_id),),
        (RAW,),
        partition_key=key,
        xfail=xfail,
        xfail_modes=xfail_modes,
        note=note,
    )


def _not_json(name: str, data: bytes, reason: str = INVALID_JSON, note: str = "") -> Case:
    """A payload that json mode dead-letters and raw mode lands."""
    return Case(name, data, (dead(reason),), (RAW,), note=note)


def _wrap(body: bytes) -> bytes:
    """Magic, ``body`` and its correct MD5 digest: an aggregate that passes the checksum."""
    return MAGIC + body + hashlib.md5(body, usedforsecurity=False).digest()


def _body(aggregate_bytes: bytes) -> bytes:
    """The protobuf between the magic and the digest."""
    return aggregate_bytes[len(MAGIC) : -16]


def _broken(name: str, data: bytes, reason: KplReason, note: str = "") -> Case:
    """An aggregate that does not decode: one dead letter of the whole record, both modes."""
    return Case(name, data, (kpl(reason),), (kpl(reason),), aggregated=True, note=note)


def _as_plain(name: str, data: bytes, note: str) -> Case:
    """KPL-looking bytes that are not an aggregate: a plain (binary) record, and no
    UTF-8 (the magic F3 89 9A C2 is not)."""
    return Case(name, data, (dead(NOT_UTF8),), (RAW,), aggregated=True, note=note)


def _nested(depth: int, pretty: bool = False) -> bytes:
    glue = b"\n" if pretty else b""
    return b"[" * depth + glue + b"1" + glue + b"]" * depth


_VALID_ONE = aggregate([("k", b'{"a": 1}')])
"""One user record; its body is 0a 01 'k' 1a <len> 08 00 1a <len> <data>."""
_VALID_EHK = aggregate([UserRecord("k", "7", b'{"a": 1}')])
_THREE = (("k1", b'{"n": 1}'), ("k2", b'{"n": 2}'), ("k1", b'{"n": 3}'))
_VALID_THREE = aggregate(list(_THREE))
_MIXED = (("m", b'{"ok": true}'), ("m", b"{oops"), ("m", b""), ("m", b"[1]"))
_ODD_KEYS = (
    ("", b'{"key": "empty"}'),
    ("x" * 1000, b'{"key": "1000 chars"}'),
    ("a\x00b\x1f", b'{"key": "control"}'),
    ("../..", b'{"key": "dots"}'),
    ("\u2028\U0001f642", b'{"key": "separator and emoji"}'),
)
_MANY = tuple(("many", json.dumps({"i": i}).encode()) for i in range(200))
_BIG_KEY = "K" * 256
_BIG_JSON_DATA = b'{"pad": "' + b"x" * (MAX_RECORD - len(_BIG_KEY) - 11) + b'"}'
_BIG_JUNK_DATA = b"\x00not json " * ((MAX_RECORD - 4) // 10)
_PRETTY = json.dumps({"id": 7, "tags": ["a", "b"], "nested": {"x": [1, 2.5, None]}}, indent=2)
_BIG_INT = 123456789012345678901234567890


CASES: tuple[Case, ...] = (
    # -- not JSON: dead letter in json mode, landed as base64 in raw mode -------------
    _not_json("truncated object", b'{"id": 1, "name": "tru'),
    _not_json("trailing garbage", b'{"id": 1} trailing'),
    _not_json("two documents", b'{"a": 1}{"b": 2}'),
    _not_json("NaN", b'{"v": NaN}', note="orjson is strict: no NaN or Infinity"),
    _not_json("-Infinity", b'{"v": -Infinity}'),
    _not_json("bare words", b"hello world"),
    _not_json("Python literal", b"{'a': True}"),
    _not_json("trailing comma", b'{"a": 1,}'),
    _not_json("comment", b'{"a": 1} // note'),
    _not_json(
        "lone high surrogate escape",
        b'{"s": "\\ud800"}',
        note='RFC 8259 grammar allows "\\ud800"; orjson rejects it, so no reader meets it',
    ),
    _not_json("lone low surrogate escape", b'{"s": "\\udc00x"}'),
    _not_json(
        "raw newline inside a string",
        b'{"s": "line one\nline two"}',
        note="control characters must be escaped inside strings",
    ),
    _not_json("raw tab inside a string", b'{"s": "a\tb"}'),
    _not_json("NUL after the document", b'{"a": 1}\x00'),
    _not_json(
        "number beyond a double",
        b'{"v": 1e400}',
        note="valid grammar; RFC 8259 lets a parser limit range, orjson does",
    ),
    _not_json(
        "integer of 400 digits",
        b"1" + b"0" * 399,
        note="orjson reads integers beyond 64 bits as doubles; this one overflows",
    ),
    _not_json("whitespace only", b" \t\r\n "),
    _not_json("empty payload", b"", reason=EMPTY_PAYLOAD, note="raw lands an empty string"),
    _not_json("invalid UTF-8", b'{"a": "\xff\xfe"}', reason=NOT_UTF8),
    _not_json("overlong UTF-8", b'{"a": "\xc0\xaf"}', reason=NOT_UTF8),
    _not_json("UTF-8-encoded surrogate", b'{"a": "\xed\xa0\x80"}', reason=NOT_UTF8),
    _not_json("truncated UTF-8 sequence", b'{"a": "\xe2\x82"}', reason=NOT_UTF8),
    _not_json("Latin-1 text", b'{"name": "Jos\xe9"}', reason=NOT_UTF8),
    _not_json("UTF-16 JSON", '{"a": 1}'.encode("utf-16"), reason=NOT_UTF8),
    _not_json(
        "UTF-8 BOM",
        b'\xef\xbb\xbf{"a": 1}',
        note="RFC 8259 lets a parser reject a BOM; orjson does",
    ),
    _not_json("nested 1,025 deep", _nested(1025), note="orjson's depth limit is 1,024"),
    _not_json("nested 10,000 deep", _nested(10_000)),
    _not_json("1 MiB of junk", _BIG_JUNK_DATA),
    # -- JSON that is not an object, or is unusual: lands --------------------------
    _payload(b"42", name="scalar number"),
    _payload(b'"just a string"', name="scalar string"),
    _payload(b"null", name="scalar null"),
    _payload(b"true", name="scalar true"),
    _payload(b'[1, "two", {"three": 3}]', name="array"),
    _payload(b"{}", name="empty object"),
    _payload(b"[]", name="empty array"),
    _payload(b'  {"a": 1}  ', name="surrounding spaces", note="spliced stripped"),
    _payload(b'{"a": 1}\n', name="trailing newline", note="stripped"),
    _payload(_PRETTY.encode(), name="pretty-printed", note="one line: CR and LF become spaces"),
    _payload(_PRETTY.replace("\n", "\r\n").encode(), name="pretty-printed CRLF"),
    _payload(b'{"s": "line one\\nline two"}', name="escaped newline in a string"),
    _payload(
        '{"s": "a\u2028b\u2029c\x85d"}'.encode(),
        name="U+2028, U+2029, U+0085 in a string",
        note="valid JSON, landed raw: split lines on \\n only, not str.splitlines()",
    ),
    _payload(b'{"s": "\\ud83d\\ude42"}', name="escaped surrogate pair"),
    _payload('{"s": "日本語 🙂"}'.encode(), name="non-ASCII text"),
    _payload(
        b'{"n": %d}' % _BIG_INT,
        name="integer beyond 64 bits",
        note="spliced verbatim: no digit is lost",
    ),
    _payload(
        b'{"x": 0.%s}' % (b"1" * 1500),
        name="number of 1,502 characters",
        note="lands; Spark's JSON reader (Jackson: numbers up to 1,000 chars) marks it corrupt",
    ),
    _payload(b'{"a": 1, "a": 2}', name="duplicate keys", note="spliced verbatim"),
    _payload(
        _nested(1024),
        name="nested 1,024 deep",
        note=(
            "lands, but Spark's JSON reader (Jackson: depth up to 1,000, envelope "
            "included) marks lines with data nested 1,000+ deep corrupt"
        ),
    ),
    _payload(
        _BIG_JSON_DATA,
        key=_BIG_KEY,
        name="1 MiB record",
        note="data + 256-char key = 1,048,576 bytes, the Kinesis maximum",
    ),
    _payload(
        b'{\n  "n": %d\n}' % _BIG_INT,
        name="pretty-printed, integer beyond 64 bits",
    ),
    _payload(
        _nested(300, pretty=True),
        name="pretty-printed, nested 300 deep",
    ),
    # -- the event id (LANDER_EVENT_ID_POINTER=/event_id) ---------------------------
    _payload(b'{"id": 1}', name="event id missing", note="event_id null"),
    _payload(b'{"event_id": 42}', name="event id a number", event_id="42"),
    _payload(b'{"event_id": 1.5}', name="event id a float", event_id="1.5"),
    _payload(b'{"event_id": true}', name="event id a boolean", event_id="true"),
    _payload(b'{"event_id": null}', name="event id null"),
    _payload(b'{"event_id": {"a": 1}}', name="event id an object", note="event_id null"),
    _payload(b'{"event_id": [1]}', name="event id an array", note="event_id null"),
    _payload(b'[{"event_id": "x"}]', name="payload an array"),
    _payload(b'{"event_id": ""}', name="event id empty", event_id=""),
    _payload('{"event_id": "é\\n🙂"}'.encode(), name="event id non-ASCII", event_id="é\n🙂"),
    # -- partition keys (Kinesis: 1-256 characters) ---------------------------------
    _payload(b'{"pk": 1}', key="a", name="key of 1 character"),
    _payload(b'{"pk": 2}', key="p" * 256, name="key of 256 characters"),
    _payload(b'{"pk": 3}', key="é" * 256, name="key of 256 two-byte characters"),
    _payload(b'{"pk": 4}', key="日本語のキー", name="key in Japanese"),
    _payload(
        b'{"pk": 5}',
        key="🙂🚀",
        name="key of emoji",
        note="kinesalite counts UTF-16 units: at most 128 emoji",
    ),
    _payload(b'{"pk": 6}', key="a key with spaces", name="key with spaces"),
    _payload(b'{"pk": 7}', key="   ", name="key of spaces only"),
    _payload(b'{"pk": 8}', key="a/b/c/", name="key with slashes"),
    _payload(b'{"pk": 9}', key="../..", name="key ../..", note="never part of an object key"),
    _payload(b'{"pk": 10}', key="%2F%00", name="key %2F%00"),
    _payload(b'{"pk": 11}', key='{"a": "b"}\\', name="key of JSON and a backslash"),
    _payload(
        b'{"pk": 12}',
        key="a\x00b\x01\x1f\x7f",
        name="key with control characters",
        note="kinesalite accepts them; the Kinesis API states no pattern (unverified on AWS)",
    ),
    _payload(b'{"pk": 13}', key="line\nbreak\r\ttab", name="key with CR, LF, tab"),
    _payload(
        b'{"pk": 14}',
        key="a\ud800b",
        name="key with a lone surrogate",
        note="kinesalite accepts it (unverified on AWS)",
    ),
    # -- KPL aggregates ---------------------------------------------------------------
    Case(
        "aggregate of 3",
        _VALID_THREE,
        (JSON,) * 3,
        (RAW,) * 3,
        partition_key="k1",
        aggregated=True,
        records=_THREE,
    ),
    Case(
        "aggregate with bad payloads inside",
        aggregate(list(_MIXED)),
        (JSON, dead(INVALID_JSON), dead(EMPTY_PAYLOAD), JSON),
        (RAW,) * 4,
        partition_key="m",
        aggregated=True,
        records=_MIXED,
        note="each user record on its own; dead letters keyed by subsequence",
    ),
    Case(
        "aggregate with odd keys inside",
        aggregate(list(_ODD_KEYS)),
        (JSON,) * len(_ODD_KEYS),
        (RAW,) * len(_ODD_KEYS),
        partition_key="agg",
        aggregated=True,
        records=_ODD_KEYS,
        note="keys inside an aggregate escape Kinesis's checks: empty, 1,000 chars, ...",
    ),
    Case(
        "aggregate of 200",
        aggregate(list(_MANY)),
        (JSON,) * len(_MANY),
        (RAW,) * len(_MANY),
        partition_key="many",
        aggregated=True,
        records=_MANY,
    ),
    Case(
        "aggregate with an unknown field",
        _wrap(_body(_VALID_ONE) + b"\x78\x01"),
        (JSON,),
        (RAW,),
        aggregated=True,
        records=(("k", b'{"a": 1}'),),
        note="field 15 skipped, as protobuf says",
    ),
    _as_plain(
        "aggregate with bad magic",
        b"\xf4" + _VALID_ONE[1:],
        note="not an aggregate: a plain binary record (as the KCL does)",
    ),
    _broken(
        "aggregate with bad MD5", _VALID_ONE[:-1] + bytes([_VALID_ONE[-1] ^ 1]), "bad_checksum"
    ),
    _broken("aggregate cut by 1 byte", _VALID_THREE[:-1], "bad_checksum"),
    _broken("aggregate without its digest", _VALID_THREE[:-16], "bad_checksum"),
    _broken("aggregate cut in half", _VALID_THREE[: len(_VALID_THREE) // 2], "bad_checksum"),
    _broken("aggregate cut to 21 bytes", _VALID_THREE[:21], "bad_checksum"),
    _as_plain(
        "aggregate cut to 20 bytes",
        _VALID_THREE[:20],
        note="magic + 16 bytes holds no body: a plain record",
    ),
    _as_plain("magic only", MAGIC, note="a plain record"),
    _as_plain(
        "magic and digest, no body",
        _wrap(b""),
        note="an aggregate of zero records cannot be told from a plain record",
    ),
    _broken("aggregate truncated, digest valid", _wrap(_body(_VALID_THREE)[:-3]), "truncated"),
    _broken(
        "key index past the key table",
        _wrap(_body(_VALID_ONE).replace(b"\x08\x00", b"\x08\x05", 1)),
        "bad_index",
    ),
    _broken(
        "hash key index past its table",
        _wrap(_body(_VALID_EHK).replace(b"\x10\x00", b"\x10\x03", 1)),
        "bad_index",
    ),
    _broken("record without data", _wrap(b"\x0a\x01k\x1a\x02\x08\x00"), "missing_field"),
    _broken("record without key index", _wrap(b"\x0a\x01k\x1a\x03\x1a\x01x"), "missing_field"),
    _broken(
        "records field as a varint",
        _wrap(b"\x0a\x01k\x18\x05"),
        "bad_protobuf",
    ),
    _broken("varint of 11 bytes", _wrap(b"\x1a" + b"\xff" * 11), "bad_protobuf"),
    _broken("groups nested 40 deep", _wrap(b"\x23" * 40), "bad_protobuf"),
    _broken(
        "key not UTF-8",
        _wrap(_body(_VALID_ONE).replace(b"\x0a\x01k", b"\x0a\x01\xff", 1)),
        "bad_utf8",
    ),
    Case(
        "aggregate of zero records",
        _wrap(b"\x0a\x01k"),
        (dead("kpl_"),),
        (dead("kpl_"),),
        aggregated=True,
    ),
)


def by_name() -> dict[str, Case]:
    """The cases by name (names are unique)."""
    named = {case.name: case for case in CASES}
    assert len(named) == len(CASES), "duplicate case names"
    return named
