"""The in-daemon filter for producers that number each partition key's records.

``LANDER_DEDUP_KEYS`` (with ``LANDER_SEQUENCE_POINTER``): per shard, each of the most
recent partition keys keeps a high watermark, the largest number seen, and which of
the :data:`WINDOW` numbers below it were seen (one 64-bit mask: IPsec's and QUIC's
anti-replay window). A record whose number was seen is a retry and is dropped; one
whose number is new, above the watermark or in a gap below it, lands. So the filter
never drops a record it has not seen, even when a retried put lands after later ones
(PutRecords returns failures per record, and producers resend them after the rest).

A number more than :data:`WINDOW` below its key's watermark, or a key forgotten (the
least recently used beyond ``LANDER_DEDUP_KEYS``, or a worker restart), is not judged:
the record lands, and the compaction, which compares every copy
(:mod:`sparkjobs.compaction.dedupe`), removes it if it is a retry. The filter is a saving, never
the guarantee. Pure.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from consumer.landing.envelope import EventIdPointer

WINDOW = 64
"""How many numbers below a key's watermark are remembered one by one."""
_FULL = (1 << WINDOW) - 1


class SequenceWatermarks:
    """Per partition key, a watermark and the seen numbers just below it, for at most
    ``keys`` keys (the least recently used forgotten first)."""

    def __init__(self, keys: int) -> None:
        if keys < 1:
            raise ValueError("keys must be at least 1")
        self.keys = keys
        self._state: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def seen(self, key: str, number: int) -> bool:
        """True if ``number`` was seen for ``key`` (a retry); remembers it either way."""
        state = self._state.get(key)
        if state is None:
            self._state[key] = (number, 1)
            if len(self._state) > self.keys:
                self._state.popitem(last=False)
            return False
        self._state.move_to_end(key)
        high, mask = state
        if number > high:
            shift = number - high
            mask = ((mask << shift) & _FULL | 1) if shift < WINDOW else 1
            self._state[key] = (number, mask)
            return False
        below = high - number
        if below >= WINDOW:
            return False  # too old to judge: let it land, the compaction decides
        bit = 1 << below
        if mask & bit:
            return True
        self._state[key] = (high, mask | bit)
        return False

    def __len__(self) -> int:
        return len(self._state)


class NumberPointer:
    """The producer's number in a JSON payload: an integer, or a string of digits."""

    def __init__(self, pointer: str) -> None:
        self._pointer = EventIdPointer(pointer)

    def number(self, payload: bytes) -> int | None:
        """The payload's number, or None (no number there, or not an integer, or the
        payload is not JSON: the encoder dead-letters those)."""
        try:
            document: Any = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return None
        text = self._pointer.resolve(document)
        if text is None:
            return None
        digits = text[1:] if text.startswith("-") else text
        if not digits.isascii() or not digits.isdigit() or len(digits) > 30:
            return None
        return int(text)
