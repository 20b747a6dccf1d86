"""The landed line: one user record as one JSON object on one line.

Fields, in the order the lander writes them::

    {"stream": …, "shard_id": …, "sequence_number": "…", "subsequence_number": n,
     "partition_key": …, "arrival_ts": "YYYY-MM-DDTHH:MM:SS.mmmZ",
     "event_id": … (only when an event-id pointer is configured), "data": …}

``data`` is always last, so its text is the tail of the line: a reader takes the
payload exactly as the producer sent it (JSON text in json mode, a base64 string in
raw mode) by slicing, without parsing and re-serialising it (which would change
``1E+2``, big integers, key order or whitespace). :func:`parse_line` does that; the
header before it is small and parsed as JSON.

Dead letters are one JSON object a line too, with :data:`DEAD_LETTER_FIELDS`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

Kind = Literal["string", "integer", "json"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a landed line."""

    name: str
    kind: Kind
    """``string`` and ``integer`` as JSON has them; ``json``: any JSON text, kept as
    written (the payload)."""
    doc: str
    optional: bool = False


FIELDS: tuple[Field, ...] = (
    Field("stream", "string", "the stream's name"),
    Field("shard_id", "string", "the shard the record was read from"),
    Field("sequence_number", "string", "Kinesis sequence number, decimal digits"),
    Field("subsequence_number", "integer", "position inside a KPL aggregate (0 otherwise)"),
    Field("partition_key", "string", "the record's partition key"),
    Field("arrival_ts", "string", "ApproximateArrivalTimestamp, ISO-8601 UTC with ms and Z"),
    Field("event_id", "string", "the producer's id (LANDER_EVENT_ID_POINTER)", optional=True),
    Field("data", "json", "the payload: JSON text as sent, or a base64 string in raw mode"),
)
"""Every field, in line order; ``data`` is last."""

NAMES: tuple[str, ...] = tuple(field.name for field in FIELDS)
HEADER: tuple[str, ...] = NAMES[:-1]
DATA = "data"

DEAD_LETTER_FIELDS: tuple[str, ...] = (
    "reason",
    "stream",
    "shard_id",
    "sequence_number",
    "subsequence_number",
    "partition_key",
    "arrival_ts",
    "data_base64",
)
"""A dead letter's fields: why, where the record was, and its bytes in base64."""

DATA_MARKER = ',"data":'
"""What precedes the payload in every landed line. Its first occurrence is the field's
(inside a JSON string a ``"`` is always escaped), and the payload runs from after it to
the line's final ``}``: any reader, Python or Spark, takes ``data`` as that slice."""

_DATA_KEY = DATA_MARKER.encode()


class LineError(ValueError):
    """A line that is not a landed line of this format."""


def format_ts(when: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z: how ``arrival_ts`` is written."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_ts(text: str) -> datetime:
    """Inverse of :func:`format_ts` (raises ValueError for anything else)."""
    if not text.endswith("Z"):
        raise ValueError(f"not a UTC timestamp with Z: {text!r}")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class LandedLine:
    """A landed line read back: the header's values and the payload as written."""

    stream: str
    shard_id: str
    sequence_number: str
    subsequence_number: int
    partition_key: str
    arrival_ts: str
    event_id: str | None
    data: bytes
    """The payload's text exactly as it stands in the line."""
    has_event_id: bool = False
    """Whether the line carries an ``event_id`` field at all."""


def encode_line(
    *,
    stream: str,
    shard_id: str,
    sequence_number: int | str,
    subsequence_number: int,
    partition_key: str,
    arrival_ts: str,
    data: bytes,
    event_id: str | None = None,
    with_event_id: bool = False,
) -> bytes:
    """A landed line, written with the standard library: the reference the lander's
    fast encoder is held to. ``data`` must be one line of JSON text (json mode) or a
    JSON string (raw mode); it is written as given."""
    values: list[tuple[str, str | int | None]] = [
        ("stream", stream),
        ("shard_id", shard_id),
        ("sequence_number", str(sequence_number)),
        ("subsequence_number", subsequence_number),
        ("partition_key", partition_key),
        ("arrival_ts", arrival_ts),
    ]
    if with_event_id:
        values.append(("event_id", event_id))
    head = b",".join(b'"%s":%s' % (name.encode(), _json(value)) for name, value in values)
    return b"{" + head + _DATA_KEY + data + b"}\n"


def _json(value: str | int | None) -> bytes:
    """A value as JSON in UTF-8; a lone surrogate (possible in a partition key) as its
    ``\\udXXX`` escape, since it has no UTF-8 form."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


def parse_line(line: bytes) -> LandedLine:
    """Read a landed line: the header as JSON, ``data`` sliced as written.

    Raises :class:`LineError` (a ValueError) for a line that is not one (not JSON,
    a field missing or of the wrong type, fields out of order). The first
    ``,"data":`` is the field's: inside a JSON string a ``"`` is always escaped, so
    that text cannot occur in an earlier value.
    """
    at = line.find(_DATA_KEY)
    tail = line[at + len(_DATA_KEY) :].rstrip(b"\r\n") if at >= 0 else b""
    if at < 0 or not tail.endswith(b"}"):
        raise LineError("not a landed line: no data field at its end")
    try:
        head = json.loads(line[:at] + b"}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise LineError(f"not a landed line: {exc}") from None
    if not isinstance(head, dict):
        raise LineError("not a landed line: not a JSON object")
    names = tuple(head)
    if names not in (HEADER, tuple(name for name in HEADER if name != "event_id")):
        raise LineError(f"not a landed line: fields {names}")
    for field in FIELDS[:-1]:
        value = head.get(field.name)
        wanted = int if field.kind == "integer" else str
        if field.name in head and not ((field.optional and value is None) or type(value) is wanted):
            raise LineError(f"not a landed line: {field.name} is {value!r}")
    sequence = head["sequence_number"]
    if not sequence.isdigit() or not sequence.isascii():
        raise LineError(f"not a landed line: sequence_number {sequence!r}")
    return LandedLine(
        stream=head["stream"],
        shard_id=head["shard_id"],
        sequence_number=sequence,
        subsequence_number=head["subsequence_number"],
        partition_key=head["partition_key"],
        arrival_ts=head["arrival_ts"],
        event_id=head.get("event_id"),
        data=tail[:-1],
        has_event_id="event_id" in head,
    )
