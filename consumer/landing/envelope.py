"""One user record as one JSON line, or the reason it must be dead-lettered.

The line is the archive's (:mod:`consumer.archive.envelope` defines its fields and
order, and holds the reference encoder and parser this fast one is tested against).
The hot path of the lander. In ``json`` mode the payload is parsed (strictly: UTF-8,
RFC 8259, no NaN) to prove it is JSON and to read the event id, but it is not
re-serialised: the validated bytes are spliced into the envelope as they are, unless
they span several lines.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson

from consumer.archive.envelope import format_ts
from consumer.stream.records import Record


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that cannot be landed as JSON, with why."""

    record: Record
    reason: str

    def line(self, stream: str) -> bytes:
        """The dead letter as a JSON line: the whole record, base64, and the reason."""
        line: bytes = orjson.dumps(
            {
                "reason": self.reason,
                "stream": stream,
                "shard_id": self.record.shard_id,
                "sequence_number": self.record.sequence_number,
                "subsequence_number": self.record.position.subsequence,
                "partition_key": orjson.Fragment(json_string(self.record.partition_key)),
                "arrival_ts": format_ts(self.record.arrival),
                "data_base64": base64.b64encode(self.record.data).decode("ascii"),
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
        return line


class EventIdPointer:
    """A JSON pointer (RFC 6901) into a parsed payload, e.g. ``/event_id``."""

    def __init__(self, pointer: str) -> None:
        if not pointer.startswith("/"):
            raise ValueError(f"JSON pointer must start with '/': {pointer!r}")
        self.pointer = pointer
        self.parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]
        self._top = self.parts[0] if len(self.parts) == 1 else None

    def resolve(self, document: Any) -> str | None:
        """The id as a string, or None when the payload does not have it."""
        if self._top is not None and isinstance(document, dict):
            node = document.get(self._top)
            if isinstance(node, str):
                return node
        node = document
        for part in self.parts:
            if isinstance(node, dict):
                if part not in node:
                    return None
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        if node is None or isinstance(node, dict | list):
            return None
        return node if isinstance(node, str) else orjson.dumps(node).decode()


def json_string(text: str) -> bytes:
    """``text`` as a JSON string. A lone surrogate (which Kinesis passes through in a
    partition key) cannot be UTF-8; it is written as its ``\\ud8xx`` escape instead of
    failing the record, and so the shard."""
    try:
        return orjson.dumps(text)
    except TypeError:
        return json.dumps(text).encode("ascii")


def _invalid_json(data: bytes, exc: orjson.JSONDecodeError) -> str:
    """The dead-letter reason for a payload orjson refused: ``not UTF-8`` naming the
    first bad byte (text in another encoding, or binary), else ``invalid JSON`` (the
    report counts reasons by the words before the first colon)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8: at byte {bad.start}: {bad.reason}"
    return f"invalid JSON: {str(exc)[:200]}"


class Encoder:
    """Turns a shard's records into JSON lines."""

    def __init__(
        self,
        stream: str,
        payload_format: Literal["json", "raw"] = "json",
        event_id: EventIdPointer | None = None,
    ) -> None:
        self.stream = stream
        self.raw = payload_format == "raw"
        self.event_id = event_id
        self._stream_json = orjson.dumps(stream)
        self._heads: dict[str, bytes] = {}
        self._last_second = -1
        self._second_text = b""
        self._last_ms = -1
        self._last_text = b""
        self._keys: dict[str, bytes] = {}
        self._last_sequence = -1
        self._sequence_text = b""

    def _head(self, shard_id: str) -> bytes:
        head = self._heads.get(shard_id)
        if head is None:
            head = b'{"stream":%s,"shard_id":%s,"sequence_number":"' % (
                self._stream_json,
                orjson.dumps(shard_id),
            )
            self._heads[shard_id] = head
        return head

    def _arrival(self, us: int) -> bytes:
        # Arrival times are milliseconds, and neighbours share them (the user records
        # of one aggregate, records put together); the second changes rarely, so it is
        # formatted once per second and the milliseconds added.
        ms = us // 1000
        if ms == self._last_ms:
            return self._last_text
        self._last_ms = ms
        second = ms // 1000
        if second != self._last_second:
            self._last_second = second
            when = datetime.fromtimestamp(second, UTC)
            self._second_text = when.strftime("%Y-%m-%dT%H:%M:%S").encode()
        self._last_text = self._second_text + _MILLIS[ms % 1000]
        return self._last_text

    def _key(self, partition_key: str) -> bytes:
        # Partition keys repeat (KPL aggregates often carry a handful); bounded cache.
        encoded = self._keys.get(partition_key)
        if encoded is None:
            encoded = json_string(partition_key)
            if len(self._keys) < 4096:
                self._keys[partition_key] = encoded
        return encoded

    def encode(self, record: Record) -> tuple[bytes, str | None] | DeadLetter:
        """The line for ``record`` and its event id, or a dead letter."""
        if record.error is not None:
            return DeadLetter(record, record.error)
        event_id: str | None = None
        if self.raw:
            payload = b'"' + base64.b64encode(record.data) + b'"'
        else:
            payload = record.data
            if not payload:
                return DeadLetter(record, "empty payload")
            try:
                document = orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                return DeadLetter(record, _invalid_json(payload, exc))
            if 10 in payload or 13 in payload:  # a byte value: memchr, 8x a b"\n" search
                # In valid JSON a CR or LF byte can only be whitespace between tokens
                # (inside strings they must be escaped, and UTF-8 never uses these bytes
                # within a character), so blanking them keeps the payload byte for byte
                # otherwise. Re-serialising would not: orjson writes at most 254 levels
                # of nesting (it reads 1,024) and turns big integers into doubles.
                payload = payload.replace(b"\r", b" ").replace(b"\n", b" ")
            payload = payload.strip()
            if self.event_id is not None:
                event_id = self.event_id.resolve(document)
        # The helpers' caches are read here first: a call per field costs more than the
        # formatting itself on this path.
        us = record.arrival_us
        if us < 0:
            us = record.micros()
        arrival = self._last_text if us // 1000 == self._last_ms else self._arrival(us)
        head = self._heads.get(record.shard_id) or self._head(record.shard_id)
        key = self._keys.get(record.partition_key) or self._key(record.partition_key)
        extra = b',"event_id":' + orjson.dumps(event_id) if self.event_id is not None else b""
        sequence, subsequence = record.position
        if subsequence == 0:
            line = _LINE % (head, sequence, key, arrival, extra, payload)
        else:
            # The members of a KPL aggregate share its sequence number, and formatting a
            # 56-digit number costs more than the rest of the line: once per aggregate.
            if sequence != self._last_sequence:
                self._last_sequence = sequence
                self._sequence_text = b"%d" % sequence
            text = self._sequence_text
            line = _MEMBER_LINE % (head, text, subsequence, key, arrival, extra, payload)
        return line, event_id


_MILLIS: Final = [b".%03dZ" % ms for ms in range(1000)]
"""The end of an arrival time for each millisecond: a concatenation, not a format."""
_LINE: Final = b'%s%d","subsequence_number":0,"partition_key":%s,"arrival_ts":"%s"%s,"data":%s}\n'
_MEMBER_LINE: Final = (
    b'%s%s","subsequence_number":%d,"partition_key":%s,"arrival_ts":"%s"%s,"data":%s}\n'
)
"""A line's format: a record at subsequence 0, and a later member of a KPL aggregate
(its sequence number formatted once per aggregate); ``%s`` after ``arrival_ts`` is the
``event_id`` field or nothing."""
