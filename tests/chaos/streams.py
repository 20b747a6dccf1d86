"""The streams of a chaos run.

With ``Profile.streams`` 1 the fleet reads one stream (``LANDER_STREAM``). With 3 it
reads every stream whose name matches ``chaos-<seed>*`` (``LANDER_STREAMS``): the main
stream, which takes the reshards and the full rate, and two side streams at an eighth
of it. One side stream stops producing at 30 % of the run and is deleted once every
record it got has landed; a fourth stream is created at 40 % and produces until 90 %.
So three streams are read at any time, the fleet picks one up and retires one while
workers die, freeze and join and the AWS calls fail.

Positions are qualified by stream: shard ids and sequence numbers repeat across streams.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from consumer.cli.produce import Produced, Producer, ProduceSpec

At = tuple[str, str, str, int]
"""A user record's position across streams: stream, shard, sequence, subsequence."""

SIDE_RATE = 1 / 8
"""A side stream's rate, as a share of the main stream's."""


@dataclass
class ChaosStream:
    """One stream of the run: when it produces, and whether it is created or deleted."""

    name: str
    shards: int
    rate: float
    starts: float
    """Share of the run at which its producer starts (a created stream is created then)."""
    lasts: float
    """Share of the run it produces for."""
    run_id: str
    bad_records: int = 0
    created: bool = False
    deleted: bool = False
    """Deleted mid-run, once every record it got has landed."""
    producer: Producer | None = None
    task: asyncio.Task[Produced] | None = None
    produced: Produced | None = None
    gone: bool = False
    """Deleted by the run (only for ``deleted`` streams)."""

    def spec(
        self, seconds: float, seed: int, retry_share: float, aggregate_share: float
    ) -> ProduceSpec:
        """What its producer writes, for a run of ``seconds``."""
        return ProduceSpec(
            stream=self.name,
            count=int(seconds * self.lasts * self.rate),
            rate=self.rate,
            retry_share=retry_share,
            aggregate_share=aggregate_share,
            bad_records=self.bad_records,
            run_id=self.run_id,
            seed=seed,
        )

    def places(self, *, bad: bool = False) -> set[At]:
        """Where its good (or, with ``bad``, its bad) records were written."""
        if self.produced is None:
            return set()
        return {(self.name, *place) for place in self.produced.places(bad=bad)}


def plan_streams(
    count: int, seed: int, shards: int, rate: float, bad_records: int
) -> list[ChaosStream]:
    """The run's streams: the main one first."""
    main = ChaosStream(f"chaos-{seed}", shards, rate, 0.0, 1.0, f"c{seed}", bad_records)
    if count == 1:
        return [main]
    if count != 3:
        raise ValueError(f"a chaos run reads 1 or 3 streams, not {count}")
    side = rate * SIDE_RATE
    return [
        main,
        ChaosStream(f"chaos-{seed}-b", 2, side, 0.0, 1.0, f"c{seed}b"),
        ChaosStream(f"chaos-{seed}-c", 1, side, 0.0, 0.3, f"c{seed}c", deleted=True),
        ChaosStream(f"chaos-{seed}-d", 2, side, 0.4, 0.5, f"c{seed}d", created=True),
    ]


def pattern(seed: int) -> str:
    """``LANDER_STREAMS`` for a run of several streams."""
    return f"chaos-{seed}*"


def total(streams: list[ChaosStream]) -> Produced:
    """Every stream's counts added up (landmarks stay with each stream)."""
    out = Produced()
    for stream in streams:
        p = stream.produced
        if p is None:
            continue
        out.events += p.events
        out.retries += p.retries
        out.bad += p.bad
        out.kinesis_records += p.kinesis_records
        out.aggregates += p.aggregates
        out.aggregated_user_records += p.aggregated_user_records
        out.put_calls += p.put_calls
        out.failed_entries_put_again += p.failed_entries_put_again
        out.seconds = max(out.seconds, p.seconds)
    return out
