"""Landed ranges of one shard: a set of closed position intervals.

Ranges of different shards interleave (sequence numbers are per shard), so a range
set only ever holds one shard's ranges: seed 000 compared them across shards.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from consumer.sequence import Position


class RangeSet:
    """Disjoint, sorted, merged closed intervals of positions."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, ranges: Iterable[tuple[Position, Position]] = ()) -> None:
        self._starts: list[Position] = []
        self._ends: list[Position] = []
        for first, last in ranges:
            self.add(first, last)

    def add(self, first: Position, last: Position) -> None:
        """Add [first, last], merging with overlapping neighbours."""
        if last < first:
            raise ValueError(f"empty range {first}..{last}")
        lo = bisect.bisect_left(self._ends, first)
        hi = bisect.bisect_right(self._starts, last)
        if lo < hi:
            first = min(first, self._starts[lo])
            last = max(last, self._ends[hi - 1])
        self._starts[lo:hi] = [first]
        self._ends[lo:hi] = [last]

    def __contains__(self, position: object) -> bool:
        if not isinstance(position, Position):
            return False
        index = bisect.bisect_right(self._starts, position) - 1
        return index >= 0 and position <= self._ends[index]

    def __len__(self) -> int:
        return len(self._starts)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(zip(self._starts, self._ends, strict=True))

    @property
    def end(self) -> Position | None:
        """The highest landed position, if any."""
        return self._ends[-1] if self._ends else None
