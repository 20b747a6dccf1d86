"""The KPL aggregated record format, encoded: user records packed as the KPL packs them.

For load generation (``lander produce``), the benchmarks and the tests; the worker only
decodes (:mod:`.kpl`, whose docstring describes the format). tests/stream/test_kpl.py
holds this encoder and the decoder to each other's inverse and both to an independent
encoder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from consumer.stream.kpl import (
    KPL_DEFAULT_MAX_BYTES,
    MAGIC,
    MAX_RECORD_BYTES,
    MIN_AGGREGATE,
    UserRecord,
)

__all__ = ["Aggregate", "aggregate", "aggregate_chunks"]


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One encoded aggregate with the keys to put it under, as the KPL chooses them.

    The KPL routes an aggregate by its first user record's keys, so the others may
    belong to other shards; consumers deaggregate regardless.
    """

    partition_key: str
    explicit_hash_key: str | None
    data: bytes
    record_count: int


def aggregate(records: Sequence[UserRecord | tuple[str, bytes]]) -> bytes:
    """Encode user records as one KPL aggregate, deduplicating the key tables.

    Accepts :class:`UserRecord` values or ``(partition_key, data)`` pairs. Raises
    ``ValueError`` for an empty sequence, which would encode to a record that is not
    :func:`is_aggregated`. The result is not checked against any size limit; use
    :func:`aggregate_chunks` for that.
    """
    if not records:
        raise ValueError("cannot aggregate zero records")
    builder = _Builder()
    for record in records:
        fields = _fields(record)
        builder.add(*fields, builder.size_with(*fields))
    return builder.encode()


def aggregate_chunks(
    records: Sequence[UserRecord | tuple[str, bytes]],
    max_bytes: int = KPL_DEFAULT_MAX_BYTES,
) -> list[Aggregate]:
    """Pack user records, in order, into aggregates of at most ``max_bytes`` each.

    Packing is greedy, as in the KPL: a record goes into the current aggregate if the
    whole encoded aggregate (magic and digest included) stays within ``max_bytes``.
    Raises ``ValueError`` if ``max_bytes`` exceeds :data:`MAX_RECORD_BYTES` or if one
    record cannot fit in an aggregate on its own.
    """
    if max_bytes > MAX_RECORD_BYTES:
        raise ValueError(f"max_bytes {max_bytes} exceeds the Kinesis limit {MAX_RECORD_BYTES}")
    chunks: list[Aggregate] = []
    builder = _Builder()
    for index, record in enumerate(records):
        fields = _fields(record)
        size = builder.size_with(*fields)
        if size > max_bytes and builder.count:
            chunks.append(builder.finish())
            builder = _Builder()
            size = builder.size_with(*fields)
        if size > max_bytes:
            raise ValueError(f"record {index} needs {size} bytes alone, over max_bytes {max_bytes}")
        builder.add(*fields, size)
    if builder.count:
        chunks.append(builder.finish())
    return chunks


def _fields(record: UserRecord | tuple[str, bytes]) -> tuple[str, str | None, bytes]:
    if isinstance(record, UserRecord):
        return record.partition_key, record.explicit_hash_key, record.data
    partition_key, data = record
    return partition_key, None, data


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE: Final = [bytes((value,)) for value in range(0x80)]


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


class _Builder:
    """Accumulates one aggregate, tracking its exact encoded size as records arrive."""

    def __init__(self) -> None:
        self.partition_keys: dict[str, int] = {}
        self.hash_keys: dict[str, int] = {}
        self.body: list[bytes] = []
        self.first: tuple[str, str | None] | None = None
        self.count = 0
        self.size = MIN_AGGREGATE

    def size_with(self, partition_key: str, hash_key: str | None, data: bytes) -> int:
        """The encoded size of the aggregate if this record were added."""
        size = self.size
        pk_index = self.partition_keys.get(partition_key)
        if pk_index is None:
            pk_index = len(self.partition_keys)
            size += _field_size(len(partition_key.encode()))
        inner = 1 + _varint_size(pk_index) + _field_size(len(data))
        if hash_key is not None:
            ehk_index = self.hash_keys.get(hash_key)
            if ehk_index is None:
                ehk_index = len(self.hash_keys)
                size += _field_size(len(hash_key.encode()))
            inner += 1 + _varint_size(ehk_index)
        return size + _field_size(inner)

    def add(self, partition_key: str, hash_key: str | None, data: bytes, size: int) -> None:
        """Append one user record; ``size`` is what :meth:`size_with` said for it."""
        self.size = size
        pk_index = self.partition_keys.setdefault(partition_key, len(self.partition_keys))
        record = [b"\x08", _varint(pk_index)]
        if hash_key is not None:
            ehk_index = self.hash_keys.setdefault(hash_key, len(self.hash_keys))
            record += (b"\x10", _varint(ehk_index))
        record += (b"\x1a", _varint(len(data)), data)
        inner = b"".join(record)
        self.body += (b"\x1a", _varint(len(inner)), inner)
        if self.first is None:
            self.first = (partition_key, hash_key)
        self.count += 1

    def encode(self) -> bytes:
        """Magic, key tables and records (in field order, as the KPL writes), digest."""
        parts: list[bytes] = []
        for tag, table in ((b"\x0a", self.partition_keys), (b"\x12", self.hash_keys)):
            for key in table:
                raw = key.encode()
                parts += (tag, _varint(len(raw)), raw)
        body = b"".join(parts + self.body)
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        encoded = b"".join((MAGIC, body, digest))
        assert len(encoded) == self.size, "size tracking diverged from the encoding"
        return encoded

    def finish(self) -> Aggregate:
        """The aggregate with the first record's keys to put it under."""
        assert self.first is not None
        partition_key, hash_key = self.first
        return Aggregate(partition_key, hash_key, self.encode(), self.count)


def _field_size(length: int) -> int:
    """Bytes taken by a length-delimited field with a one-byte tag."""
    return 1 + _varint_size(length) + length
