"""A worker that cannot land gives its shards back; one process per worker id; stuck
shards are reported. In-process, on the in-memory stream, lease table and archive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest

from consumer.config import Settings, load_settings
from consumer.landing.lander import Lander
from consumer.landing.objects import MemoryObjectStore, ObjectStoreError, PutOutcome, probe
from consumer.leases.identity import DuplicateWorkerError, join_board
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import WORKER_KEY_PREFIX
from consumer.leases.store import SlotLostError
from consumer.lifecycle.shard_consumer import ShardProgress
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.sequence import Position, Sentinel
from consumer.stream.memory import MemoryStream
from consumer.stream.records import Record
from tests.support.simtime import simulated

FAST = {
    "failover_seconds": 2.0,
    "shard_sync_seconds": 0.2,
    "poll_idle_seconds": 0.2,
    "shutdown_seconds": 3.0,
    "max_records_per_file": 5,
    "flush_seconds": 0.3,
    "landing_failures": 2,
}


class BreakableArchive(MemoryObjectStore):
    """An archive whose writes fail, as a missing bucket's do, while ``broken``."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False
        self.refused = 0

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        if self.broken:
            self.refused += 1
            raise ObjectStoreError("S3 NoSuchBucket: the bucket does not exist", retriable=False)
        return await super().put_if_absent(key, body, metadata)


def _settings(name: str, **extra: object) -> Settings:
    return load_settings(
        stream="s", lease_table="leases", worker_id=name, archive="s3://b/p", **{**FAST, **extra}
    )


def _lander_worker(
    stream: MemoryStream,
    store: MemoryLeaseStore,
    archive: MemoryObjectStore,
    name: str,
) -> Worker:
    settings = _settings(name)
    metrics = LanderMetrics()

    async def check() -> None:
        await probe(archive, "p")

    def factory() -> Lander:
        return Lander(settings, archive, "p", metrics)

    return Worker(settings, store, stream, factory, metrics=metrics, probe=check)


async def _until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def _landed_positions(archive: MemoryObjectStore) -> list[str]:
    import gzip
    import json

    positions = []
    for key, body in archive.objects.items():
        if "/stream=" in key and "/dead-letter/" not in key:
            for line in gzip.decompress(body).splitlines():
                record = json.loads(line)
                positions.append(f"{record['shard_id']}:{record['sequence_number']}")
    return positions


@simulated
async def test_a_worker_that_cannot_land_gives_its_shards_back_and_returns_when_fixed() -> None:
    """With its archive refusing writes, a worker fails its shard, probes, becomes
    not ready, releases every lease and takes none; a healthy worker lands every
    record exactly once; once the archive works again the probe lets it back in."""
    stream = MemoryStream(2)
    for i in range(20):
        stream.put(f'{{"i": {i}}}'.encode(), f"key-{i}")
    store = MemoryLeaseStore()
    good_archive, bad_archive = MemoryObjectStore(), BreakableArchive()
    bad_archive.broken = True
    bad = _lander_worker(stream, store, bad_archive, "bad")
    bad_task = asyncio.create_task(bad.run())
    await _until(lambda: bad.fitness.unfit is not None)
    assert not bad.health().ready
    assert "NoSuchBucket" in str(bad.health().detail["cannot_land"])
    assert bad.metrics.registry.get_sample_value("lander_landing_healthy") == 0
    assert bad.metrics.registry.get_sample_value("lander_ready") == 0
    await _until(lambda: not bad.coordinator.held)
    assert all(lease.owner != "bad" for lease in await store.list_leases())
    assert bad.metrics.value("lander_leases_released", why="unfit") >= 1
    restarts = [
        bad.metrics.value("lander_shard_restarts", shard_id=f"shardId-00000000000{n}")
        for n in (0, 1)
    ]
    assert sum(restarts) >= FAST["landing_failures"]

    # The archive here is a separate object for the bad worker, so that the healthy one
    # lands into one that works: the fleet's records all land there, once each.
    good = _lander_worker(stream, store, good_archive, "good")
    good_task = asyncio.create_task(good.run())
    await _until(lambda: len(_landed_positions(good_archive)) == 20)
    assert len(set(_landed_positions(good_archive))) == 20
    assert not bad.coordinator.held, "an unfit worker took a lease"

    bad_archive.broken = False
    await _until(lambda: bad.fitness.unfit is None)
    assert bad.metrics.registry.get_sample_value("lander_landing_healthy") == 1
    await _until(lambda: bad.health().ready)
    for worker in (bad, good):
        worker.request_stop()
    await asyncio.wait_for(asyncio.gather(bad_task, good_task), 15)


@simulated
async def test_a_shard_that_fails_while_the_probe_passes_is_retried_in_place() -> None:
    """When the probe passes, the fault is the shard's: the worker keeps it, stays able
    to land, and reports the shard's failures, waiting records and last error in its
    heartbeat and metrics."""

    class Failing(Lander):
        async def process_records(self, batch: object) -> None:
            raise RuntimeError("processor bug on this shard")

    stream = MemoryStream(1)
    for i in range(5):
        stream.put(f'{{"i": {i}}}'.encode(), "k")
    store, archive = MemoryLeaseStore(), MemoryObjectStore()
    settings = _settings("w1")
    metrics = LanderMetrics()

    async def check() -> None:
        await probe(archive, "p")

    worker = Worker(
        settings,
        store,
        stream,
        lambda: Failing(settings, archive, "p", metrics),
        metrics=metrics,
        probe=check,
    )
    task = asyncio.create_task(worker.run())
    shard = "shardId-000000000000"

    async def reported() -> bool:
        leases = await store.list_leases() if store.leases is not None else []
        return bool(leases) and leases[0].report is not None and leases[0].report.failures >= 3

    async with asyncio.timeout(30):
        while not await reported():
            await asyncio.sleep(0.05)
    lease = next(iter(await store.list_leases()))
    assert lease.owner == "w1"
    assert lease.report is not None
    assert lease.report.pending == 5
    assert lease.report.checkpoint_age_ms > 0
    assert "processor bug on this shard" in (lease.report.last_error or "")
    assert worker.fitness.unfit is None
    assert metrics.value("lander_shard_restarts", shard_id=shard) >= 3
    labels = {"stream": metrics.stream, "shard_id": shard}
    assert metrics.registry.get_sample_value("lander_records_pending", labels) == 5
    age = metrics.registry.get_sample_value("lander_checkpoint_age_seconds", labels)
    assert age is not None
    assert age > 0
    worker.request_stop()
    await asyncio.wait_for(task, 15)


@simulated
async def test_a_second_live_process_under_one_worker_id_is_refused() -> None:
    """Two workers with one id: the second refuses to start with an error naming the
    id; the first keeps its claim and its leases. A graceful stop gives the id up (the
    board slot, which is the claim, is removed; no other item is written for it)."""
    stream = MemoryStream(2)
    store = MemoryLeaseStore()
    first = _lander_worker(stream, store, MemoryObjectStore(), "same")
    first_task = asyncio.create_task(first.run())
    await _until(lambda: first.health().ready and len(first.coordinator.held) == 2)
    second = _lander_worker(stream, store, MemoryObjectStore(), "same")
    with pytest.raises(DuplicateWorkerError, match="'same'"):
        await asyncio.wait_for(second.run(), 10)
    assert first.health().ready
    assert len(first.coordinator.held) == 2
    first.request_stop()
    await asyncio.wait_for(first_task, 10)
    assert await store.get_lease(WORKER_KEY_PREFIX + "same") is None
    assert "same" not in (await store.read_board()).slots


@simulated
async def test_a_dead_process_board_slot_is_taken_over_and_its_zombie_refused() -> None:
    """A slot whose counter stands still is taken after the
    failover time, a fenced one at once; the old process's beat is refused, and when it
    tries to join again while the new one beats, it is told another process runs."""
    store = MemoryLeaseStore()
    await store.ensure_table()
    now = [0.0]

    async def tick(seconds: float) -> None:
        now[0] += seconds

    def clock() -> float:
        return now[0]

    await join_board(store, "w", "dead", 10, clock=clock, sleep=tick)
    slot = await join_board(store, "w", "heir", 10, clock=clock, sleep=tick)
    assert now[0] >= 10
    assert slot.instance == "heir"
    with pytest.raises(SlotLostError):
        await store.beat("w", 0, held=0, leaving=False, read=0)

    async def heir_beats(seconds: float) -> None:
        now[0] += seconds
        counter = (await store.read_board()).slots["w"].counter
        await store.beat("w", counter, held=0, leaving=False, read=0)

    with pytest.raises(DuplicateWorkerError, match="'w'"):
        await join_board(store, "w", "dead", 10, clock=clock, sleep=heir_beats)
    assert (await store.read_board()).slots["w"].instance == "heir"
    assert await store.fence("w", (await store.read_board()).slots["w"].counter)
    before = now[0]
    slot = await join_board(store, "w", "third", 10, clock=clock, sleep=tick)
    assert now[0] == before
    assert slot.instance == "third"
    assert not slot.fenced


def _record(sequence: int) -> Record:
    from datetime import UTC, datetime

    return Record(
        shard_id="s",
        position=Position(sequence, 0),
        partition_key="k",
        data=b"{}",
        arrival=datetime(2026, 11, 23, tzinfo=UTC),
    )


def test_progress_counts_what_no_checkpoint_covers_and_ages_only_while_records_wait() -> None:
    """Pending is what was delivered past the checkpoint; the age runs only while
    records wait, from when they began to wait or the checkpoint last moved."""
    progress = ShardProgress()
    assert progress.age(100.0) == 0.0
    progress.delivered(5, now=10.0)
    progress.delivered(8, now=12.0)
    assert progress.age(20.0) == 10.0
    progress.failed(RuntimeError("boom"))
    progress.checkpointed(3, now=21.0)
    assert (progress.pending, progress.failures, progress.last_error) == (3, 0, None)
    assert progress.age(25.0) == 4.0
    progress.checkpointed(0, now=30.0)
    assert progress.age(99.0) == 0.0


def test_shard_consumer_pending_follows_partial_checkpoints() -> None:
    """A checkpoint inside a batch leaves exactly the later records pending."""
    from collections import deque

    from consumer.lifecycle.shard_consumer import ShardConsumer

    consumer = ShardConsumer.__new__(ShardConsumer)
    consumer.progress = ShardProgress()
    consumer._unchecked = deque([[_record(1), _record(2), _record(3)], [_record(4), _record(5)]])
    consumer._unchecked_count = 5

    class Clock:
        clock = staticmethod(lambda: 1.0)

    consumer.coordinator = Clock()  # type: ignore[assignment]
    consumer._checkpointed(Position(2, 0))
    assert consumer.progress.pending == 3
    consumer._checkpointed(Position(4, 0))
    assert consumer.progress.pending == 1
    consumer._checkpointed(Sentinel.SHARD_END)
    assert consumer.progress.pending == 0


@simulated
async def test_a_shard_task_that_dies_is_started_again_not_left_renewed() -> None:
    """A shard supervisor that dies of a bug does not leave a lease held but never
    read: the worker runs the shard again (its lease is still this worker's)."""
    stream = MemoryStream(1)
    for i in range(5):
        stream.put(f'{{"i": {i}}}'.encode(), "k")
    store, archive = MemoryLeaseStore(), MemoryObjectStore()
    worker = _lander_worker(stream, store, archive, "w1")
    original = worker.shards.own
    starts: list[str] = []

    async def flaky(key: str) -> None:
        starts.append(key)
        if len(starts) == 1:
            raise RuntimeError("a bug in the shard supervisor")
        await original(key)

    worker.shards.own = flaky  # type: ignore[method-assign]
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(_landed_positions(archive)) == 5)
    assert starts == ["shardId-000000000000"] * 2
    worker.request_stop()
    await asyncio.wait_for(task, 10)
