"""User records: what a processor receives, one per (sequence, subsequence) position."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Final

from consumer.sequence import Position
from consumer.stream import KinesisRecord
from consumer.stream.kpl import MAGIC, KplError, deaggregate_columns, is_aggregated

RECORD_FIELDS = (
    "shard_id",
    "position",
    "partition_key",
    "data",
    "arrival",
    "explicit_hash_key",
    "error",
    "arrival_us",
)
"""A :class:`Record`'s fields, in its constructor's order."""


class Record:
    """One user record.

    Treat it as immutable. ``error`` is set when the Kinesis record looked like a KPL
    aggregate but could not be unpacked (bad checksum, truncated, ...): ``data`` is
    then the whole raw record, so a processor can dead-letter it instead of losing it
    or stalling.

    A plain class rather than a dataclass, with the dataclass's constructor, equality
    and repr: one is built per record, and a compiled build (mypyc) runs a dataclass's
    generated ``__init__`` in the interpreter, attribute by attribute, at about 8 % of
    the landing hot path's CPU on KPL input (docs/benchmarks.md, hotpath).
    """

    __slots__ = RECORD_FIELDS

    def __init__(  # noqa: PLR0917 (a dataclass's positional constructor, kept)
        self,
        shard_id: str,
        position: Position,
        partition_key: str,
        data: bytes,
        arrival: datetime,
        explicit_hash_key: str | None = None,
        error: str | None = None,
        arrival_us: int = -1,
    ) -> None:
        self.shard_id = shard_id
        self.position = position
        self.partition_key = partition_key
        self.data = data
        self.arrival = arrival
        self.explicit_hash_key = explicit_hash_key
        self.error = error
        self.arrival_us = arrival_us
        """``arrival`` in microseconds since the epoch (-1: not computed yet; use
        :meth:`micros`). The landing hot path cuts and formats on this integer."""

    def _fields(self) -> tuple[object, ...]:
        return (
            self.shard_id,
            self.position,
            self.partition_key,
            self.data,
            self.arrival,
            self.explicit_hash_key,
            self.error,
            self.arrival_us,
        )

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]
    """Equal records compare by value and are not hashable, as a dataclass's."""

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{name}={value!r}" for name, value in zip(RECORD_FIELDS, self._fields(), strict=True)
        )
        return f"Record({inner})"

    @property
    def sequence_number(self) -> str:
        """The Kinesis sequence number in its string form."""
        return str(self.position.sequence)

    def micros(self) -> int:
        """``arrival`` in microseconds since the epoch, computed once."""
        us = self.arrival_us
        if us < 0:
            us = self.arrival_us = epoch_us(self.arrival)
        return us


_position: Final = tuple.__new__
"""Builds a :class:`Position` from its two fields without the named tuple's ``__new__``
(a Python function): about 0.1 us less per record on the hot path."""

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def epoch_us(when: datetime) -> int:
    """Microseconds since the epoch, exactly (no float). A naive time is local time, as
    ``datetime.astimezone`` reads it."""
    if when.tzinfo is None:
        when = when.astimezone(UTC)
    return (when - EPOCH) // _MICROSECOND


def unpack(
    shard_id: str, raw: Iterable[KinesisRecord], after: Position | None = None
) -> list[Record]:
    """Every user record of ``raw`` past ``after``, in order: :func:`user_records` of
    each, with the plain (not aggregated) records, nearly all of them on most streams,
    built in this loop."""
    records: list[Record] = []
    append = records.append
    last_arrival: datetime | None = None
    last_us = 0
    for record in raw:
        data = record.data
        if data.startswith(MAGIC) and is_aggregated(data):
            users = user_records(shard_id, record)
            if after is not None and users[0].position <= after:  # a re-read aggregate
                users = [user for user in users if user.position > after]
            records.extend(users)
            continue
        sequence = record.sequence
        if after is not None and sequence <= after[0]:  # (sequence, 0) > after
            continue
        arrival = record.arrival
        if arrival != last_arrival:  # neighbours often share the millisecond
            last_arrival, last_us = arrival, epoch_us(arrival)
        append(
            Record(
                shard_id,
                _position(Position, (sequence, 0)),
                record.partition_key,
                data,
                arrival,
                record.explicit_hash_key,
                None,
                last_us,
            )
        )
    return records


def user_records(shard_id: str, record: KinesisRecord) -> list[Record]:
    """Unpack a Kinesis record into its user records (one, unless KPL-aggregated)."""
    if not is_aggregated(record.data):
        return [_whole(shard_id, record)]
    try:
        keys, hash_keys, payloads = deaggregate_columns(record.data)
    except KplError as exc:
        return [_whole(shard_id, record, error=f"kpl_{exc.reason}: {exc}")]
    if not payloads:
        # A valid aggregate of nothing: dead-letter it rather than let it vanish.
        return [_whole(shard_id, record, error="kpl_empty: aggregate holds no user records")]
    sequence, arrival = record.sequence, record.arrival
    us = epoch_us(arrival)
    return [
        Record(
            shard_id,
            _position(Position, (sequence, index)),
            keys[index],
            payloads[index],
            arrival,
            hash_keys[index],
            None,
            us,
        )
        for index in range(len(payloads))
    ]


def _whole(shard_id: str, record: KinesisRecord, error: str | None = None) -> Record:
    """The Kinesis record as one user record at subsequence 0."""
    return Record(
        shard_id,
        Position(record.sequence, 0),
        record.partition_key,
        record.data,
        record.arrival,
        record.explicit_hash_key,
        error,
        epoch_us(record.arrival),
    )
