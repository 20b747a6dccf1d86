"""Kinesis sequence numbers and positions within a shard.

Sequence numbers are decimal strings of up to 128 digits. Compared as strings they
order wrongly as soon as two have different lengths, so everywhere in the project
they are Python ints; the string form exists only at the AWS boundary.

A *position* is ``(sequence number, subsequence number)``: the subsequence numbers
the user records packed into one KPL-aggregated Kinesis record, and is 0 for a
plain record.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

MAX_SEQUENCE_DIGITS = 128


def parse_sequence_number(text: str) -> int:
    """Parse a Kinesis sequence number, rejecting anything that is not one."""
    if not text or len(text) > MAX_SEQUENCE_DIGITS or not text.isdigit() or not text.isascii():
        raise ValueError(f"not a Kinesis sequence number: {text[:140]!r}")
    return int(text)


class Position(NamedTuple):
    """A user record's place in a shard, ordered as Kinesis orders them.

    A named tuple: it is built for every record on the hot path, and tuple order is
    exactly (sequence, subsequence) order.
    """

    sequence: int
    subsequence: int = 0

    def __str__(self) -> str:
        return f"{self.sequence}:{self.subsequence}"

    @classmethod
    def of(cls, sequence: str, subsequence: int = 0) -> Position:
        """Build a position from the string form Kinesis and DynamoDB carry."""
        return cls(parse_sequence_number(sequence), subsequence)


class Sentinel(StrEnum):
    """Checkpoint values that are not positions, spelled as KCL spells them."""

    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    SHARD_END = "SHARD_END"


Checkpoint = Position | Sentinel
"""What a lease records as read so far: a position, or a KCL sentinel."""


def checkpoint_to_item(checkpoint: Checkpoint) -> tuple[str, int]:
    """The (``checkpoint``, ``checkpointSubSequenceNumber``) pair KCL stores."""
    if isinstance(checkpoint, Sentinel):
        return checkpoint.value, 0
    return str(checkpoint.sequence), checkpoint.subsequence


def checkpoint_from_item(value: str, subsequence: int) -> Checkpoint:
    """Inverse of :func:`checkpoint_to_item`; raises ``ValueError`` on garbage."""
    try:
        return Sentinel(value)
    except ValueError:
        return Position(parse_sequence_number(value), subsequence)
