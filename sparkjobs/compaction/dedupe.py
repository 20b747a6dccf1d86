"""The dedupe model, in plain Python: which landed copies a compaction publishes.

The rule (docs/sparkjobs.md, "What counts as a duplicate"):

- Copies are ordered by arrival, shard, sequence number (as a number), subsequence
  number and the object they were read from (:func:`order_key`).
- A copy at the same position (shard, sequence, subsequence) as an earlier copy is a
  **transport** duplicate: the same record landed twice.
- A record with an event id is a **producer** duplicate when another record with that
  id (any copy, published or not) arrived at most ``horizon`` before it: a producer
  retry. The *previous* copy decides, so a record's fate depends only on the records
  of the horizon before it, never on where a run starts or which hours it rewrites.
  A retry further apart than the horizon is published again.
- A record without an event id but with a producer sequence (``LANDER_SEQUENCE_POINTER``:
  producers that number each partition key's records) is a **sequence** duplicate by the
  same rule, its key being its partition key and that number: the retry of a put whose
  producer stamps no id. Counted apart from producer (event id) duplicates.
- Every other record is **kept**.

So a run needs, besides the hours it rewrites, every record of the horizon before
them, and an hour is stale when its own objects or those of the horizon before it
change (:mod:`sparkjobs.compaction.plan`). The Spark job computes the same rule in one window step
(:mod:`sparkjobs.compaction.sparkplan`); this module is the reference the tests hold both the job
and the planning to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Cause = Literal["kept", "transport", "producer", "sequence"]


@dataclass(frozen=True, slots=True)
class Copy:
    """One landed line, as far as dedupe cares."""

    shard_id: str
    sequence_number: str
    subsequence_number: int
    arrival: datetime
    event_id: str | None
    rel: str
    """The object it was read from (the last tie-break)."""
    producer_sequence: str | None = None
    """The producer's number for the record within its partition key (None: the
    payload has none, or no sequence pointer is set)."""
    partition_key: str = ""

    @property
    def position(self) -> tuple[str, str, int]:
        """Where the record sits in the stream: the same for every copy of it."""
        return (self.shard_id, self.sequence_number, self.subsequence_number)


def order_key(copy: Copy) -> tuple[datetime, str, int, str, int, str]:
    """The order copies are judged in: the first of equals wins."""
    seq = copy.sequence_number
    return (copy.arrival, copy.shard_id, len(seq), seq, copy.subsequence_number, copy.rel)


def fates(copies: Iterable[Copy], horizon: timedelta) -> dict[Copy, Cause]:
    """Each copy's fate under the rule above."""
    groups: dict[object, list[Copy]] = {}
    for copy in copies:
        groups.setdefault(_key(copy), []).append(copy)
    found: dict[Copy, Cause] = {}
    for group in groups.values():
        previous: Copy | None = None
        for copy in sorted(group, key=order_key):
            if previous is None:
                found[copy] = "kept"
            elif previous.position == copy.position:
                found[copy] = "transport"
            elif copy.arrival - previous.arrival <= horizon:
                found[copy] = "producer" if copy.event_id is not None else "sequence"
            else:
                found[copy] = "kept"
            previous = copy
    return found


def _key(copy: Copy) -> tuple[str, object]:
    """What a copy is deduped by: its event id, else its producer's (partition key,
    sequence), else its position (so only transport copies meet)."""
    if copy.event_id is not None:
        return ("event", copy.event_id)
    if copy.producer_sequence is not None:
        return ("sequence", (copy.partition_key, copy.producer_sequence))
    return ("at", copy.position)
