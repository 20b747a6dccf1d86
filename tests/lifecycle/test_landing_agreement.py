"""Workers agree on how each stream lands, or say so (consumer.lifecycle.agreement):
in-process, on the in-memory stream, lease table and archive.

- start-up records the first worker's landing, lets an equal one in, refuses another
  with one line naming what differs, and lets one in that LANDER_LANDING_ADOPT names;
- a worker whose landing was replaced so gives its shards back, and the records land
  once each, across the two archive prefixes, through the change.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable

import pytest

from consumer.config import Settings, load_settings
from consumer.landing.lander import Lander
from consumer.landing.objects import MemoryObjectStore, probe
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import LandingRecord
from consumer.lifecycle.agreement import Agreement, LandingDiffersError, landing_of
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.stream.memory import MemoryStream
from tests.support.simtime import simulated

FAST = {
    "failover_seconds": 2.0,
    "shard_sync_seconds": 0.2,
    "poll_idle_seconds": 0.2,
    "shutdown_seconds": 3.0,
    "max_records_per_file": 5,
    "flush_seconds": 0.3,
}


def _settings(name: str, prefix: str, **extra: object) -> Settings:
    return load_settings(
        stream="orders",
        lease_table="leases",
        worker_id=name,
        archive=f"s3://lake/{prefix}",
        **{**FAST, **extra},
    )


async def test_start_up_records_agrees_refuses_and_adopts() -> None:
    store = MemoryLeaseStore()
    await store.ensure_table()
    first = _settings("w1", "landed")
    one = await Agreement(store, "w1", frozenset()).settle("orders", landing_of(first))
    assert one.change == "record the landing of stream orders"
    digest = landing_of(first).digest
    assert one.line == f"orders: landing {digest} (s3://lake/landed, json, event id none)"
    record = await store.read_landing("orders")
    assert record is not None
    assert (record.digest, record.worker) == (digest, "w1")

    same = await Agreement(store, "w2", frozenset()).settle("orders", landing_of(first))
    assert (same.change, same.line.endswith(", as the fleet's")) == (None, True)

    odd = _settings("w3", "elsewhere", event_id_pointer="/event_id")
    ours = landing_of(odd)
    with pytest.raises(LandingDiffersError) as refused:
        await Agreement(store, "w3", frozenset()).settle("orders", ours)
    assert str(refused.value) == (
        "stream orders lands otherwise in this worker than in the fleet (archive "
        "s3://lake/elsewhere here, s3://lake/landed in the fleet; event-id pointer /event_id "
        "here, none in the fleet); to change it on purpose, roll out with "
        f"LANDER_LANDING_ADOPT={ours.digest} (docs/operations.md#changing-how-a-stream-lands)"
    )
    assert refused.value.exit_code == 3
    # Another digest named for adoption does not let this landing in.
    with pytest.raises(LandingDiffersError):
        await Agreement(store, "w3", frozenset({"0123456789ab"})).settle("orders", ours)

    adopting = Agreement(store, "w3", frozenset({ours.digest}))
    checked = await adopting.settle("orders", ours, check_only=True)
    assert checked.change == f"adopt landing {ours.digest} for stream orders in place of {digest}"
    assert (await store.read_landing("orders")) == record  # a check writes nothing
    await adopting.settle("orders", ours)
    after = await store.read_landing("orders")
    assert after is not None
    assert (after.digest, after.worker) == (ours.digest, "w3")
    # Now the first landing is the odd one out.
    with pytest.raises(LandingDiffersError, match="s3://lake/landed here, s3://lake/elsewhere"):
        await Agreement(store, "w4", frozenset()).settle("orders", landing_of(first))


async def test_a_record_from_a_release_that_lands_otherwise_is_named_by_digest() -> None:
    store = MemoryLeaseStore()
    await store.ensure_table()
    foreign = LandingRecord("fedcba987654", '{"future":"field"}', "w9", 0)
    await store.record_landing("orders", foreign, replacing=None)
    with pytest.raises(LandingDiffersError, match="the fleet's landing is fedcba987654"):
        await Agreement(store, "w1", frozenset()).settle("orders", landing_of(_settings("w1", "p")))


async def test_a_lease_table_deleted_under_start_up_is_created_again_and_recorded() -> None:
    """Another worker's operator deleted the table between this worker's preflight and
    its reading of the record (a worker died at start so in CI): start-up creates the
    table again, as running workers do, and records the landing."""
    store = MemoryLeaseStore()
    store.drop_table()
    ours = landing_of(_settings("w1", "landed"))
    settled = await Agreement(store, "w1", frozenset()).settle("orders", ours)
    assert settled.change == "record the landing of stream orders"
    record = await store.read_landing("orders")
    assert record is not None
    assert record.digest == ours.digest

    class DeletedBeforeTheWrite(MemoryLeaseStore):
        deleted = False

        async def record_landing(
            self, stream: str, record: LandingRecord, *, replacing: str | None
        ) -> bool:
            if not self.deleted:
                self.deleted = True
                self.drop_table()
            return await super().record_landing(stream, record, replacing=replacing)

    racing = DeletedBeforeTheWrite()
    await racing.ensure_table()
    await Agreement(racing, "w1", frozenset()).settle("orders", ours)
    again = await racing.read_landing("orders")
    assert again is not None
    assert again.digest == ours.digest


def _lander_worker(
    stream: MemoryStream, store: MemoryLeaseStore, archive: MemoryObjectStore, settings: Settings
) -> Worker:
    metrics = LanderMetrics()
    prefix = settings.archive_uri.removeprefix("s3://lake/")

    async def check() -> None:
        await probe(archive, prefix)

    def factory() -> Lander:
        return Lander(settings, archive, prefix, metrics)

    return Worker(settings, store, stream, factory, metrics=metrics, probe=check)


def _landed(archive: MemoryObjectStore, prefix: str) -> list[str]:
    found = []
    for key, body in archive.objects.items():
        if key.startswith(f"{prefix}/stream=") and "/dead-letter/" not in key:
            for line in gzip.decompress(body).splitlines():
                record = json.loads(line)
                found.append(f"{record['shard_id']}:{record['sequence_number']}")
    return found


async def _until(predicate: Callable[[], bool], timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


@simulated
async def test_a_worker_whose_landing_was_replaced_gives_its_shards_back() -> None:
    """The rolling restart that moves a stream's archive: the old worker lands, a new
    one adopts the new prefix, the old one sees it within its watch interval, gives
    every shard back and is not ready; every record lands once, in one prefix or the
    other, and none after the change in the old one."""
    stream = MemoryStream(2)
    for i in range(30):
        stream.put(f'{{"i": {i}}}'.encode(), f"key-{i}")
    store, archive = MemoryLeaseStore(), MemoryObjectStore()
    await store.ensure_table()
    old_settings, new_settings = _settings("old", "before"), _settings("new", "after")
    old_agreement = Agreement(store, "old", frozenset())
    await old_agreement.settle("orders", landing_of(old_settings))
    old = _lander_worker(stream, store, archive, old_settings)
    old_task = asyncio.create_task(old.run())
    old_watch = asyncio.create_task(old_agreement.watch(old.fitness, interval=1.0))
    await _until(lambda: len(_landed(archive, "before")) == 30)
    assert old.metrics.registry.get_sample_value("lander_landing_agreed") == 1

    adopt = frozenset({landing_of(new_settings).digest})
    await Agreement(store, "new", adopt).settle("orders", landing_of(new_settings))
    new = _lander_worker(stream, store, archive, new_settings)
    new_task = asyncio.create_task(new.run())
    for i in range(30, 40):  # in flight as the change happens
        stream.put(f'{{"i": {i}}}'.encode(), f"key-{i}")
    await _until(lambda: old.fitness.unfit is not None)
    assert "stream orders lands otherwise in this worker" in str(old.fitness.unfit)
    assert "worker new wrote landing" in str(old.fitness.unfit)
    await _until(lambda: not old.coordinator.held)
    assert not old.health().ready
    assert old.metrics.registry.get_sample_value("lander_landing_agreed") == 0
    assert old.metrics.registry.get_sample_value("lander_landing_healthy") == 1
    landed_before = len(_landed(archive, "before"))
    for i in range(40, 60):  # after the change: only the new landing may take them
        stream.put(f'{{"i": {i}}}'.encode(), f"key-{i}")
    await _until(lambda: len(_landed(archive, "before")) + len(_landed(archive, "after")) >= 60)
    await asyncio.sleep(3)  # nothing more lands anywhere
    everything = _landed(archive, "before") + _landed(archive, "after")
    assert len(everything) == len(set(everything)) == 60
    assert len(_landed(archive, "before")) == landed_before, "the old landing went on"
    assert len(_landed(archive, "after")) >= 20
    assert not old.coordinator.held, "a superseded worker took a lease"
    for worker in (old, new):
        worker.request_stop()
    old_watch.cancel()
    await asyncio.gather(old_watch, return_exceptions=True)
    await asyncio.wait_for(asyncio.gather(old_task, new_task), 15)
