"""Exactly once under crashes: the real Lander on the in-memory archive, hypothesis
choosing the records, the batch sizes and where the worker dies."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.archive.layout import DEAD_LETTER
from consumer.config import load_settings
from consumer.landing.lander import Lander
from consumer.landing.objects import MemoryObjectStore, PutOutcome
from consumer.lifecycle.processor import InitializationInput, ProcessRecordsInput
from consumer.metrics import LanderMetrics
from consumer.sequence import Position
from consumer.stream.records import Record

T0 = datetime(2026, 11, 22, 6, 0, 0, tzinfo=UTC)
SHARD = "shardId-000000000000"


class CrashError(Exception):
    """The worker process died here."""


class CrashingStore(MemoryObjectStore):
    """Dies right after the n-th successful put: landed, never checkpointed."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_after: int | None = None
        self.puts = 0

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        outcome = await super().put_if_absent(key, body, metadata)
        self.puts += 1
        if self.crash_after is not None and self.puts >= self.crash_after:
            self.crash_after = None
            raise CrashError
        return outcome


class FakeCheckpointer:
    """Stores the checkpoint; a lease that is never lost."""

    def __init__(self) -> None:
        self.position: Position | None = None

    async def checkpoint(self, position: Position | None = None) -> None:
        assert position is not None
        assert self.position is None or position >= self.position
        self.position = position

    async def ensure_lease(self) -> None:
        return None


@st.composite
def streams(draw: st.DrawFn) -> list[Record]:
    """Plain and aggregated records, some not JSON, arrivals over a few minutes."""
    records: list[Record] = []
    arrival = T0
    seq = 10**55
    for index in range(draw(st.integers(1, 60))):
        arrival += timedelta(seconds=draw(st.sampled_from([0, 1, 7, 45, -50])))
        seq += draw(st.integers(1, 1000))
        subs = draw(st.integers(1, 3))
        for sub in range(subs):
            bad = draw(st.integers(0, 9)) == 0
            data = b"{oops" if bad else json.dumps({"i": index, "s": sub}).encode()
            records.append(Record(SHARD, Position(seq, sub if subs > 1 else 0), "k", data, arrival))
    return records


async def _run_until_crash(
    store: CrashingStore,
    checkpointer: FakeCheckpointer,
    records: list[Record],
    batch: int,
    tick: float = 0.0,
) -> bool:
    """Feed every record after the checkpoint; True if it ran to the end.

    The worker's clock advances ``tick`` seconds per batch: at 11 (> flush_seconds)
    every batch ends with a quiet-shard flush, so runs are cut where the batches
    happen to end, differently on every replay.
    """
    config = load_settings(
        stream="s", lease_table="leases", max_records_per_file=4, flush_seconds=10.0
    )
    clock = iter(tick * step for step in range(10**6))
    lander = Lander(config, store, "archive", LanderMetrics(), clock=lambda: next(clock))
    start = checkpointer.position
    await lander.initialize(InitializationInput(SHARD, "w", start or "TRIM_HORIZON"))  # type: ignore[arg-type]
    todo = [r for r in records if start is None or r.position > start]
    try:
        for offset in range(0, len(todo), batch):
            chunk = todo[offset : offset + batch]
            await lander.process_records(ProcessRecordsInput(chunk, checkpointer, 0))
        await lander.shutdown_requested(checkpointer)
    except CrashError:
        return False
    return True


def _archive(store: MemoryObjectStore) -> tuple[Counter[Position], Counter[Position]]:
    landed: Counter[Position] = Counter()
    dead: Counter[Position] = Counter()
    for key, body in store.objects.items():
        target = dead if f"/{DEAD_LETTER}/" in f"/{key}" else landed
        for line in gzip.decompress(body).splitlines():
            doc = json.loads(line)
            target[Position(int(doc["sequence_number"]), doc["subsequence_number"])] += 1
    return landed, dead


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    streams(),
    st.lists(st.tuples(st.integers(1, 12), st.integers(1, 7)), min_size=1, max_size=4),
    st.integers(1, 7),
    st.sampled_from([0.0, 3.0, 11.0]),
)
def test_any_crash_points_then_replay_land_each_position_exactly_once(
    records: list[Record], crashes: list[tuple[int, int]], batch: int, tick: float
) -> None:
    """CrashError after any put (before its checkpoint), any number of times, restart from
    the checkpoint with other batch sizes (so clock flushes cut elsewhere): every record
    is in the archive, or the dead letters, exactly once."""

    async def scenario() -> None:
        store = CrashingStore()
        checkpointer = FakeCheckpointer()
        for crash_after, attempt_batch in crashes:
            store.crash_after = store.puts + crash_after
            if await _run_until_crash(store, checkpointer, records, attempt_batch, tick):
                break
        store.crash_after = None
        assert await _run_until_crash(store, checkpointer, records, batch, tick)
        landed, dead = _archive(store)
        good = {r.position for r in records if not r.data.startswith(b"{oops")}
        bad = {r.position for r in records if r.data.startswith(b"{oops")}
        assert set(landed) == good
        assert set(dead) == bad
        assert all(n == 1 for n in landed.values()), landed.most_common(3)
        assert all(n == 1 for n in dead.values())

    asyncio.run(scenario())


def test_table_loss_replay_from_the_start_lands_nothing_twice() -> None:
    """With the checkpoint gone, a full replay re-lands nothing and lists each minute once."""

    async def scenario() -> None:
        records = [
            Record(
                SHARD, Position(10**55 + i), "k", b'{"i": %d}' % i, T0 + timedelta(seconds=7 * i)
            )
            for i in range(40)
        ]
        store = CrashingStore()
        assert await _run_until_crash(store, FakeCheckpointer(), records, 5)
        before = dict(store.objects)
        metrics = LanderMetrics()
        config = load_settings(
            stream="s", lease_table="leases", max_records_per_file=4, flush_seconds=10.0
        )
        lander = Lander(config, store, "archive", metrics, clock=lambda: 0.0)
        fresh = FakeCheckpointer()
        await lander.initialize(InitializationInput(SHARD, "w", "TRIM_HORIZON"))  # type: ignore[arg-type]
        await lander.process_records(ProcessRecordsInput(records, fresh, 0))
        await lander.shutdown_requested(fresh)
        assert store.objects == before
        assert metrics.value("lander_duplicates_dropped", shard_id=SHARD, cause="replay") == 40
        minutes = len({(T0 + timedelta(seconds=7 * i)).replace(second=0) for i in range(40)})
        assert metrics.value("lander_reconcile_listings", shard_id=SHARD) == minutes
        assert fresh.position == records[-1].position

    asyncio.run(scenario())
