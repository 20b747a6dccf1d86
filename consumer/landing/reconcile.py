"""Reconciliation after a takeover: drop records some owner already landed.

The previous owner may have landed objects it never checkpointed (crash between put
and checkpoint), the checkpoint may be gone with the lease table, or a paused zombie
may still be landing. So before landing anything for a shard it has just taken, the
lander lists the shard's landed objects of each minute it re-reads (once per minute)
and drops records inside a landed range. Owners land in position order, so once a
record lies beyond every landed range known, everything after it is new: listing
stops, and steady state costs nothing.
"""

from __future__ import annotations

from datetime import datetime

from consumer.archive.layout import minute_of, minute_prefix, parse_key
from consumer.landing.objects import ObjectStore
from consumer.landing.ranges import RangeSet
from consumer.stream.records import Record


class Reconciler:
    """One shard's landed ranges, learnt lazily, minute by minute."""

    def __init__(self, store: ObjectStore, prefix: str, stream: str, shard_id: str) -> None:
        self.store = store
        self.prefix = prefix
        self.stream = stream
        self.shard_id = shard_id
        self.active = True
        self.landed = RangeSet()
        self.listed: set[datetime] = set()

    async def already_landed(self, record: Record) -> bool:
        """True if ``record`` lies in a landed range; ends reconciliation past them all."""
        if not self.active:
            return False
        minute = minute_of(record.arrival)
        if minute not in self.listed:
            await self._learn(minute)
        if record.position in self.landed:
            return True
        end = self.landed.end
        if end is None or record.position > end:
            self.active = False
        return False

    async def _learn(self, minute: datetime) -> None:
        folder = minute_prefix(self.prefix, self.stream, self.shard_id, minute)
        for key in await self.store.list_keys(folder):
            landed = parse_key(key)
            if landed is not None and landed.shard_id == self.shard_id:
                self.landed.add(landed.first, landed.last)
        self.listed.add(minute)
