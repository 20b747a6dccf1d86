"""The KPL aggregated record format: decode it strictly, encode it for load generation.

The Kinesis Producer Library packs many user records into one Kinesis record:
``MAGIC`` + a protobuf ``AggregatedRecord`` + the MD5 digest of the protobuf bytes::

    message AggregatedRecord {
      repeated string partition_key_table = 1;
      repeated string explicit_hash_key_table = 2;
      repeated Record records = 3;
    }
    message Record {
      required uint64 partition_key_index = 1;
      optional uint64 explicit_hash_key_index = 2;
      required bytes data = 3;
      repeated Tag tags = 4;
    }
    message Tag { required string key = 1; optional string value = 2; }

The protobuf is read by hand rather than through ``aws-kinesis-agg`` and ``protobuf``:
that library hands back a corrupt aggregate as if it were a plain record, and stops
silently part-way through one whose indexes are out of range. Here every defect raises
:class:`KplError` with a machine-readable reason, so the caller can dead-letter the
Kinesis record instead of landing garbage or losing user records without a trace.

Decoding is strict where the KPL itself is unambiguous (a known field with the wrong
wire type, a missing required field, an index outside its table, a key that is not
UTF-8 are all errors) and lenient where protobuf says to be (unknown fields, tags and
repeated scalar fields are skipped or last-one-wins), so aggregates written by newer
producers still decode.

The encoder, for load generation and tests, is :mod:`.kpl_encode`; tests/stream/test_kpl.py
holds the two to each other's inverse and both to an independent encoder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "DIGEST_SIZE",
    "KPL_DEFAULT_MAX_BYTES",
    "MAGIC",
    "MAX_RECORD_BYTES",
    "MIN_AGGREGATE",
    "KplError",
    "KplReason",
    "UserRecord",
    "deaggregate",
    "is_aggregated",
]

MAGIC: Final = b"\xf3\x89\x9a\xc2"
"""The four bytes that open every KPL aggregated record."""

DIGEST_SIZE: Final = 16
"""Length of the MD5 digest that closes every KPL aggregated record."""

MAX_RECORD_BYTES: Final = 1024 * 1024
"""The largest data blob Kinesis accepts in one record."""

KPL_DEFAULT_MAX_BYTES: Final = 51200
"""The KPL's default ``AggregationMaxSize``: bytes per aggregated Kinesis record."""

KplReason = Literal[
    "not_aggregated",
    "bad_checksum",
    "truncated",
    "bad_protobuf",
    "missing_field",
    "bad_index",
    "bad_utf8",
]
"""Why an aggregate was rejected; stable strings for dead-letter records and metrics."""

# Final: a compiled build (mypyc) folds these into its code instead of reading a
# module global, a dictionary lookup, per use.
_HEADER: Final = 4
"""``len(MAGIC)``."""
MIN_AGGREGATE: Final = _HEADER + DIGEST_SIZE
"""Magic and digest: an aggregate holds more than this."""
_VARINT: Final = 0
_I64: Final = 1
_LEN: Final = 2
_SGROUP: Final = 3
_EGROUP: Final = 4
_I32: Final = 5
# Field keys (field number << 3 | wire type) as the KPL writes them, one byte each.
_KEY_PK_TABLE: Final = 1 << 3 | _LEN
_KEY_EHK_TABLE: Final = 2 << 3 | _LEN
_KEY_RECORD: Final = 3 << 3 | _LEN
_KEY_PK_INDEX: Final = 1 << 3 | _VARINT
_KEY_EHK_INDEX: Final = 2 << 3 | _VARINT
_KEY_DATA: Final = 3 << 3 | _LEN
_KEY_TAGS: Final = 4 << 3 | _LEN
_MAX_FIELD_NUMBER: Final = (1 << 29) - 1
# Unknown groups nest; a hostile aggregate must not be able to exhaust the stack.
_MAX_GROUP_DEPTH: Final = 32
_MD5: Final = hashlib.md5(usedforsecurity=False)
"""Copied per aggregate: ``hashlib.md5()`` looks the algorithm up in OpenSSL on every
call, about 6 us, a tenth of an aggregate of 100's decode. ``usedforsecurity=False``
keeps MD5 available on FIPS-mode hosts; it is a checksum here."""


class KplError(ValueError):
    """A Kinesis record that carries the KPL magic but is not a valid aggregate.

    ``reason`` is one of :data:`KplReason`; the message says where and what.
    """

    def __init__(self, reason: KplReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason: KplReason = reason


@dataclass(frozen=True, slots=True)
class UserRecord:
    """One user record from an aggregate; its subsequence number is its list index."""

    partition_key: str
    explicit_hash_key: str | None
    data: bytes


def _slot_setter(name: str) -> Callable[[UserRecord, object], None]:
    setter: Callable[[UserRecord, object], None] = vars(UserRecord)[name].__set__
    return setter


_SET_PARTITION_KEY = _slot_setter("partition_key")
_SET_HASH_KEY = _slot_setter("explicit_hash_key")
_SET_DATA = _slot_setter("data")


def is_aggregated(data: bytes) -> bool:
    """True if ``data`` opens with the KPL magic and has a body between it and the digest.

    A record exactly as long as magic plus digest holds no protobuf and hence no user
    records; like the KCL, treat it as a plain record.
    """
    return len(data) > MIN_AGGREGATE and data.startswith(MAGIC)


def deaggregate_columns(data: bytes) -> tuple[list[str], list[str | None], list[bytes]]:
    """Decode a KPL aggregate into its user records' partition keys, explicit hash keys
    and data, as three lists in subsequence order.

    Columns rather than a tuple per user record: the consumer's hot path indexes them to
    build its own record objects (measured the same speed as tuples, compiled).

    Raises :class:`KplError` if the digest does not match, the protobuf is truncated or
    malformed, a required field is missing, an index falls outside its key table, or a
    key is not UTF-8; never returns part of a bad aggregate. An aggregate that is valid
    but holds no records decodes to empty lists.
    """
    if not is_aggregated(data):
        raise KplError("not_aggregated", "no KPL magic, or too short to hold a body")
    end = len(data) - DIGEST_SIZE
    md5 = _MD5.copy()
    md5.update(memoryview(data)[_HEADER:end])
    if md5.digest() != data[end:]:
        raise KplError("bad_checksum", "MD5 digest does not match the protobuf body")

    partition_keys: list[bytes] = []
    hash_keys: list[bytes] = []
    pk_indexes: list[int] = []
    ehk_indexes: list[int] = []
    """-1 for a member without an explicit hash key."""
    payloads: list[bytes] = []
    pos = _HEADER
    while pos < end:
        key = data[pos]
        pos += 1
        # Chained comparisons: measurably faster than a set lookup in the per-record loop.
        if key != _KEY_RECORD and key != _KEY_PK_TABLE and key != _KEY_EHK_TABLE:  # noqa: PLR1714
            pos = _other_field(data, pos - 1, end, "AggregatedRecord", 3)
            continue
        # One- and two-byte lengths are read inline: this loop runs once per user record.
        size = data[pos] if pos < end else 0x80
        if size < 0x80:
            pos += 1
        elif pos + 1 < end and data[pos + 1] < 0x80:
            size = (size & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            size, pos = _read_varint(data, pos, end)
        stop = pos + size
        if stop > end:
            raise KplError("truncated", f"field {key >> 3} runs {stop - end} bytes past the end")
        if key == _KEY_RECORD:
            pk_index, ehk_index, payload = _read_record(data, pos, stop, len(payloads))
            pk_indexes.append(pk_index)
            ehk_indexes.append(-1 if ehk_index is None else ehk_index)
            payloads.append(payload)
        elif key == _KEY_PK_TABLE:
            partition_keys.append(data[pos:stop])
        else:
            hash_keys.append(data[pos:stop])
        pos = stop

    pk_table = _decode_keys(partition_keys, "partition key")
    ehk_table = _decode_keys(hash_keys, "explicit hash key")
    if not payloads:
        return [], [], []
    n_pk, n_ehk = len(pk_table), len(ehk_table)
    if max(pk_indexes) >= n_pk:
        index = next(i for i, found in enumerate(pk_indexes) if found >= n_pk)
        raise KplError(
            "bad_index",
            f"record {index}: partition_key_index {pk_indexes[index]} outside a table of {n_pk}",
        )
    if max(ehk_indexes) >= n_ehk:
        index = next(i for i, found in enumerate(ehk_indexes) if found >= n_ehk)
        raise KplError(
            "bad_index",
            f"record {index}: explicit_hash_key_index {ehk_indexes[index]} "
            f"outside a table of {n_ehk}",
        )
    keys = [pk_table[index] for index in pk_indexes]
    if n_ehk == 0:  # nearly always: no member carries an explicit hash key
        return keys, [None] * len(payloads), payloads
    return keys, [None if i < 0 else ehk_table[i] for i in ehk_indexes], payloads


def deaggregate_fields(data: bytes) -> list[tuple[str, str | None, bytes]]:
    """:func:`deaggregate_columns` as a (partition key, explicit hash key, data) tuple
    per user record."""
    return list(zip(*deaggregate_columns(data), strict=True))


def deaggregate(data: bytes) -> list[UserRecord]:
    """Decode a KPL aggregate into its user records, in subsequence order.

    Raises :class:`KplError` if the digest does not match, the protobuf is truncated or
    malformed, a required field is missing, an index falls outside its key table, or a
    key is not UTF-8; never returns part of a bad aggregate. An aggregate that is valid
    but holds no records decodes to an empty list.
    """
    # A frozen dataclass's __init__ goes through object.__setattr__ per field, which
    # costs a third of the decode; the slot descriptors store the same fields directly.
    new = UserRecord.__new__
    records: list[UserRecord] = []
    for partition_key, hash_key, payload in deaggregate_fields(data):
        record = new(UserRecord)
        _SET_PARTITION_KEY(record, partition_key)
        _SET_HASH_KEY(record, hash_key)
        _SET_DATA(record, payload)
        records.append(record)
    return records


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read a base-128 varint at ``pos``; return its value and the position after it."""
    result = 0
    shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            # A tenth byte may only carry bit 63; more would not fit a uint64.
            if shift == 63 and byte > 1:
                raise KplError("bad_protobuf", "varint overflows 64 bits")
            return result, pos
        shift += 7
        if shift > 63:
            raise KplError("bad_protobuf", "varint longer than 10 bytes")
    raise KplError("truncated", "varint runs past the end")


def _skip_field(buf: bytes, pos: int, end: int, tag: int, depth: int = 0) -> int:
    """Skip the value of an unknown field with key ``tag``; return the position after it."""
    field, wire = tag >> 3, tag & 7
    if field == 0 or field > _MAX_FIELD_NUMBER:
        raise KplError("bad_protobuf", f"invalid field number {field}")
    if wire == _VARINT:
        return _read_varint(buf, pos, end)[1]
    if wire == _LEN:
        size, pos = _read_varint(buf, pos, end)
        pos += size
    elif wire == _I64:
        pos += 8
    elif wire == _I32:
        pos += 4
    elif wire == _SGROUP:
        if depth >= _MAX_GROUP_DEPTH:
            raise KplError("bad_protobuf", f"groups nested deeper than {_MAX_GROUP_DEPTH}")
        while True:
            inner, pos = _read_varint(buf, pos, end)
            if inner & 7 == _EGROUP:
                if inner >> 3 != field:
                    raise KplError("bad_protobuf", f"group {field} closed as {inner >> 3}")
                return pos
            pos = _skip_field(buf, pos, end, inner, depth + 1)
    else:
        raise KplError("bad_protobuf", f"field {field} has invalid wire type {wire}")
    if pos > end:
        raise KplError("truncated", f"field {field} runs {pos - end} bytes past the end")
    return pos


def _read_record(buf: bytes, pos: int, end: int, index: int) -> tuple[int, int | None, bytes]:
    """Read one ``Record`` message spanning ``buf[pos:end]``."""
    pk_index: int | None = None
    ehk_index: int | None = None
    payload: bytes | None = None
    while pos < end:
        key = buf[pos]
        pos += 1
        if key == _KEY_DATA:
            size = buf[pos] if pos < end else 0x80
            if size < 0x80:
                pos += 1
            elif pos + 1 < end and buf[pos + 1] < 0x80:
                size = (size & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                size, pos = _read_varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise KplError("truncated", f"record {index}: data runs past the record")
            payload = buf[pos:stop]
            pos = stop
        elif key == _KEY_PK_INDEX:
            pk_index = buf[pos] if pos < end else 0x80
            if pk_index < 0x80:
                pos += 1
            else:
                pk_index, pos = _read_varint(buf, pos, end)
        elif key == _KEY_EHK_INDEX:
            ehk_index, pos = _read_varint(buf, pos, end)
        elif key == _KEY_TAGS:
            # Tags are producer-side metadata that nothing downstream reads.
            pos = _skip_field(buf, pos, end, key)
        else:
            pos = _other_field(buf, pos - 1, end, f"record {index}", 4)
    if pk_index is None:
        raise KplError("missing_field", f"record {index} has no partition_key_index")
    if payload is None:
        raise KplError("missing_field", f"record {index} has no data")
    return pk_index, ehk_index, payload


def _other_field(buf: bytes, pos: int, end: int, message: str, known: int) -> int:
    """Skip the unknown field whose key starts at ``pos``; return the position after it.

    Fields ``1..known`` arrive here only in an encoding the KPL never writes. Skipping
    them would be protobuf's lenient choice, but for ``records`` it would drop user
    records from an aggregate that still looked valid, so they are errors.
    """
    key, pos = _read_varint(buf, pos, end)
    field, wire = key >> 3, key & 7
    if 1 <= field <= known:
        raise KplError(
            "bad_protobuf", f"{message}: field {field} in an unexpected encoding (wire {wire})"
        )
    return _skip_field(buf, pos, end, key)


def _decode_keys(raw: list[bytes], what: str) -> list[str]:
    """Decode a key table, naming the first entry that is not UTF-8."""
    try:
        return [key.decode() for key in raw]
    except UnicodeDecodeError:
        for position, key in enumerate(raw):
            try:
                key.decode()
            except UnicodeDecodeError as exc:
                raise KplError("bad_utf8", f"{what} {position} is not UTF-8: {exc}") from None
        raise
