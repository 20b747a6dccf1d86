"""Board hand-offs with wake-ups, on the in-memory stores and real HTTP over loopback:
with every beat ten seconds apart, a newcomer gets its share and a stopping worker's
shards move in a fraction of that, because each step wakes the worker that acts next."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from consumer.config import load_settings
from consumer.leases import board_coordinator
from consumer.leases.board import Slot
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.wake import join_address
from consumer.lifecycle.health import HealthServer
from consumer.lifecycle.processor import RecordProcessor
from consumer.lifecycle.worker import Worker
from consumer.stream.memory import MemoryStream
from tests.lifecycle.test_worker_inprocess import Journal, JournalProcessor

BEAT = 10.0
"""Every worker's beat interval here (the renew interval: failover / 3)."""


async def _until(predicate: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)
    return time.monotonic() - started


async def _producing(stream: MemoryStream, count: list[int]) -> None:
    while True:
        stream.put(f"{count[0]}".encode(), f"key-{count[0]}")
        count[0] += 1
        await asyncio.sleep(0.01)


async def _served(worker: Worker, servers: list[HealthServer], wake: bool) -> Worker:
    server = HealthServer(
        worker.metrics, worker.health, "127.0.0.1", 0, wake=worker.wake if wake else None
    )
    port = await server.start()
    servers.append(server)
    worker.advertise(join_address("127.0.0.1", port) if wake else None)
    return worker


@pytest.fixture
async def servers() -> AsyncIterator[list[HealthServer]]:
    started: list[HealthServer] = []
    yield started
    for server in started:
        await server.stop()


async def test_wake_ups_move_shards_well_inside_one_beat(servers: list[HealthServer]) -> None:
    stream, store, journal = MemoryStream(2), MemoryLeaseStore(), Journal()
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(journal)  # noqa: E731

    def worker(name: str) -> Worker:
        settings = load_settings(
            stream="s",
            lease_table="leases",
            worker_id=name,
            failover_seconds=3 * BEAT,
            poll_idle_seconds=0.2,
            shutdown_seconds=5.0,
        )
        return Worker(settings, store, stream, factory)

    first = await _served(worker("w1"), servers, wake=True)
    one = asyncio.create_task(first.run())
    await _until(lambda: len(first.coordinator.held) == 2, 10)
    count = [0]
    producer = asyncio.create_task(_producing(stream, count))
    second = await _served(worker("w2"), servers, wake=True)
    two = asyncio.create_task(second.run())
    balanced = await _until(
        lambda: len(first.coordinator.held) == 1 == len(second.coordinator.held), BEAT
    )
    await asyncio.sleep(0.5)
    first.request_stop()
    handed = await _until(lambda: len(second.coordinator.held) == 2, BEAT)
    await asyncio.wait_for(one, 10)
    producer.cancel()
    await _until(lambda: len(journal.delivered) >= count[0], 10)
    second.request_stop()
    await asyncio.wait_for(two, 10)

    # Without wake-ups each step waits for a beat: the newcomer's first one comes
    # BEAT seconds after it joined, and so does the receiver's after a stop.
    assert balanced < BEAT / 2
    assert handed < 2.0
    assert second.metrics.value("lander_board_wakeups", outcome="received") >= 2
    assert first.metrics.value("lander_board_wakeups", outcome="sent") >= 2
    positions = [(shard, p) for shard, p, _ in journal.delivered]
    assert len(positions) == len(set(positions)) == count[0]


async def test_without_wake_ups_the_receiver_acts_at_its_beat(servers: list[HealthServer]) -> None:
    """The control: the same newcomer, not woken, waits for a beat (so the test above
    measures the wake-ups, not some other path)."""
    stream, store, journal = MemoryStream(2), MemoryLeaseStore(), Journal()
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(journal)  # noqa: E731
    settings = {
        "stream": "s",
        "lease_table": "leases",
        "failover_seconds": 9.0,
        "poll_idle_seconds": 0.2,
    }
    first = await _served(
        Worker(load_settings(**settings, worker_id="w1"), store, stream, factory),
        servers,
        wake=False,
    )
    one = asyncio.create_task(first.run())
    await _until(lambda: len(first.coordinator.held) == 2, 10)
    second = await _served(
        Worker(load_settings(**settings, worker_id="w2"), store, stream, factory),
        servers,
        wake=False,
    )
    two = asyncio.create_task(second.run())
    balanced = await _until(lambda: len(second.coordinator.held) == 1, 15)
    first.request_stop()
    second.request_stop()
    await asyncio.gather(one, two)
    assert balanced >= 1.0
    assert second.metrics.value("lander_board_wakeups", outcome="received") == 0


async def test_a_worker_woken_after_it_left_does_not_join_again() -> None:
    """A wake-up (or the leaving worker's fast beat) can end the beat loop's sleep
    after the slot was removed: a stopping worker must not join again, or its fresh
    slot, not leaving, would be given leases until the leader fences it."""
    store = MemoryLeaseStore()
    worker = board_coordinator.BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    await worker.start_leaving()
    await worker.leave()
    await worker.beat_pass()
    assert "w1" not in (await store.read_board()).slots
    other = board_coordinator.BoardCoordinator(store, "w2", 3.0, 1.0)
    await other.beat_pass()  # a worker that is not stopping joins on its first pass
    assert "w2" in (await store.read_board()).slots


class _SlowAnswers(MemoryLeaseStore):
    """Beats take effect at once but answer late, as over a network."""

    async def beat(
        self,
        worker: str,
        counter: int,
        *,
        held: int,
        leaving: bool,
        read: int,
        cpu: float = 0.0,
        unfit: bool = False,
    ) -> Slot:
        slot = await super().beat(
            worker, counter, held=held, leaving=leaving, read=read, cpu=cpu, unfit=unfit
        )
        await asyncio.sleep(0.05)
        return slot


async def test_leaving_during_a_beat_in_flight_still_removes_the_slot() -> None:
    """A stopping worker beats often and is woken often: its last beat can be in flight
    when it leaves. The removal waits for it, so it is conditioned on the counter that
    beat wrote, and the slot goes (else the leader would give it leases until it fenced it)."""
    store = _SlowAnswers()
    worker = board_coordinator.BoardCoordinator(store, "w1", 3.0, 1.0)
    await worker.join()
    await worker.start_leaving()
    beating = asyncio.create_task(worker.beat())
    await asyncio.sleep(0.01)
    await worker.leave()
    await asyncio.gather(beating, return_exceptions=True)
    assert "w1" not in (await store.read_board()).slots
