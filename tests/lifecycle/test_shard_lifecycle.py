"""The shard consumer's state machine: the diagram as data, enforced, and lease loss
decided in one place whichever way it arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest

from consumer.config import load_settings
from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    ProcessRecordsInput,
)
from consumer.lifecycle.shard_consumer import (
    TRANSITIONS,
    Outcome,
    ShardConsumer,
    State,
    TransitionError,
)
from consumer.lifecycle.worker import Worker
from consumer.sequence import Sentinel
from consumer.stream.memory import MemoryStream
from consumer.stream.polling import polling

TERMINAL = {State.DONE, State.FAILED}


def test_the_diagram_is_closed_and_every_live_state_can_lose_its_lease() -> None:
    """Every state is reachable from INITIALIZING, DONE and FAILED are terminal, and
    every state before them may move to LEASE_LOST and to FAILED (a lease can be lost
    and a processor can fail at any point)."""
    assert set(TRANSITIONS) == set(State)
    seen, todo = {State.INITIALIZING}, [State.INITIALIZING]
    while todo:
        for after in TRANSITIONS[todo.pop()]:
            if after not in seen:
                seen.add(after)
                todo.append(after)
    assert seen == set(State)
    for state, allowed in TRANSITIONS.items():
        if state in TERMINAL:
            assert not allowed
        elif state is not State.LEASE_LOST:
            assert {State.LEASE_LOST, State.FAILED} <= allowed, state


class Gate:
    """A processor that holds its first batch until released, and records its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def initialize(self, init: InitializationInput) -> None:
        self.calls.append("initialize")

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        if batch.records and not self.holding.is_set():
            self.holding.set()
            await self.release.wait()
        self.calls.append("process_records")

    async def lease_lost(self) -> None:
        self.calls.append("lease_lost")

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        self.calls.append("shard_ended")

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        self.calls.append("shutdown_requested")


async def _until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def _gated_worker(failover: float) -> tuple[Worker, MemoryLeaseStore, Gate]:
    """A worker over one shard with one record, its processor a :class:`Gate`."""
    stream = MemoryStream(1)
    stream.put(b"{}", "k")
    store = MemoryLeaseStore()
    gate = Gate()
    settings = load_settings(
        stream="s",
        lease_table="leases",
        worker_id="w1",
        failover_seconds=failover,
    )
    return Worker(settings, store, stream, lambda: gate), store, gate


async def test_a_lease_found_taken_after_a_notice_ends_the_shard_as_lost() -> None:
    """Mid-batch, another worker takes the lease (an operator, or a leader that fenced
    this worker's slot) and notifies it: the worker reads its leases, finds this one
    taken and cancels the task; the consumer turns that into LEASE_LOST, the processor
    hears lease_lost once and nothing after, and the worker forgets the lease."""
    worker, store, gate = _gated_worker(failover=1.5)
    task = asyncio.create_task(worker.run())
    await _until(gate.holding.is_set)
    key = "shardId-000000000000"
    consumer = worker.shards.consumers[key]
    lease = next(lease for lease in await store.list_leases() if lease.key == key)
    await store.take(lease, "w2")  # another worker takes it behind w1's back
    assert await store.notify("w1")
    await _until(lambda: key not in worker.shards.tasks)
    assert consumer.state is State.DONE
    assert gate.calls == ["initialize", "lease_lost"]
    assert key not in worker.coordinator.held
    gate.release.set()
    worker.request_stop()
    await asyncio.wait_for(task, 10)


async def _held_shard(records: int) -> tuple[MemoryStream, BoardCoordinator, str]:
    """One shard with ``records`` records, its lease held by a worker's coordinator
    (given before it joined: it takes the lease when it joins)."""
    stream = MemoryStream(1)
    for _ in range(records):
        stream.put(b"{}", "k")
    store = MemoryLeaseStore()
    await store.ensure_table()
    key = "shardId-000000000000"
    await store.create_lease(key, frozenset(), Sentinel.TRIM_HORIZON)
    lease = await store.get_lease(key)
    assert lease is not None
    await store.take(lease, "w1")
    coordinator = BoardCoordinator(store, "w1", failover=10, renew_interval=3)
    await coordinator.join()
    return stream, coordinator, key


async def test_a_cancellation_without_a_lost_lease_is_not_a_lease_loss() -> None:
    """Cancelled while the lease is still held (a shutdown past its time limit), the
    consumer does not pretend the lease was lost: the cancellation propagates."""
    stream, coordinator, key = await _held_shard(records=1)
    assert key in coordinator.held
    gate = Gate()
    consumer = ShardConsumer(key, coordinator, stream, gate)
    run = asyncio.create_task(consumer.run())
    await _until(gate.holding.is_set)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert "lease_lost" not in gate.calls
    assert consumer.state is State.PROCESSING


async def test_a_lost_lease_cancelled_twice_is_one_clean_loss() -> None:
    """The worker cancels a lost shard once per notice (its board slot, then a
    renewal): the consumer ends as lost, and takes back every cancellation it handled,
    so the task carries none into what it awaits afterwards."""
    stream, coordinator, key = await _held_shard(records=1)
    gate = Gate()
    consumer = ShardConsumer(key, coordinator, stream, gate)
    left: list[int] = []

    async def run() -> Outcome:
        outcome = await consumer.run()
        task = asyncio.current_task()
        assert task is not None
        left.append(task.cancelling())
        return outcome

    task = asyncio.create_task(run())
    await _until(gate.holding.is_set)
    coordinator._mark_lost(key, "taken")
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    assert await task is Outcome.LOST
    assert left == [0]
    assert gate.calls == ["initialize", "lease_lost"]


def test_a_change_the_diagram_does_not_allow_raises() -> None:
    """States are enforced: DONE cannot go back to PROCESSING."""
    consumer = ShardConsumer.__new__(ShardConsumer)
    consumer.key = "s"
    consumer.state = State.DONE
    with pytest.raises(TransitionError, match="done -> processing"):
        consumer._enter(State.PROCESSING)


async def test_a_finished_lease_held_by_a_worker_is_released_without_a_consumer() -> None:
    """A lease handed over at SHARD_END (its owner reached the end while the hand-off
    was pending) is not read again: the worker releases it at once instead of failing
    on 'shard already read to its end' and retrying it for ever."""
    from consumer.leases.coordinator import HeldLease

    store = MemoryLeaseStore()
    await store.ensure_table()
    key = "shardId-000000000000"
    await store.create_lease(key, frozenset(), Sentinel.TRIM_HORIZON)
    lease = next(lease for lease in await store.list_leases() if lease.key == key)
    taken = await store.take(lease, "w1")
    finished = await store.checkpoint(taken, Sentinel.SHARD_END, None, None)
    settings = load_settings(stream="s", lease_table="leases", worker_id="w1")
    gate = Gate()
    worker = Worker(settings, store, MemoryStream(1), lambda: gate)
    worker.coordinator.held[key] = HeldLease(finished, worker.coordinator.clock())
    await asyncio.wait_for(worker.shards.own(key), 5)
    assert gate.calls == []
    assert key not in worker.coordinator.held
    after = next(lease for lease in await store.list_leases() if lease.key == key)
    assert after.finished
    assert after.owner is None


async def _nap_that_drops_a_cancel(stopping: asyncio.Event, seconds: float) -> None:
    """Python 3.11's ``wait_for`` on every version: a cancellation that comes in the
    same step as the stop is dropped and the nap returns."""
    try:
        async with asyncio.timeout(seconds):
            await stopping.wait()
    except TimeoutError:
        pass
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise


class StopsFromInside(Gate):
    """Asks its consumer to stop from inside the first batch (as a hand-off noticed at a
    checkpoint does), once the fetcher has queued the next page and naps."""

    def __init__(self, napping: asyncio.Event) -> None:
        super().__init__()
        self.napping = napping
        self.consumer: ShardConsumer | None = None

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        self.calls.append("process_records")
        if batch.records and self.consumer is not None and not self.consumer.stopping.is_set():
            await self.napping.wait()
            self.consumer.request_stop()  # and return at once: no step in between


@pytest.mark.parametrize("lossy", [False, True], ids=["nap", "nap-that-drops-a-cancel"])
async def test_a_stop_asked_while_the_next_page_waits_ends_the_shard(
    monkeypatch: pytest.MonkeyPatch, lossy: bool
) -> None:
    """The stop comes while the fetcher naps with the next page queued: the consumer
    stops at once. It used to hang until the worker exited, holding the lease unread
    with no error (the nap dropped the fetcher's cancellation, which then waited for
    ever to queue its last page); a fetcher that loses its cancellation some other way
    must not hang it either."""
    import consumer.stream.reader as reader_module

    real = reader_module.nap
    napping = asyncio.Event()

    async def nap(stopping: asyncio.Event, seconds: float) -> None:
        napping.set()
        await (_nap_that_drops_a_cancel if lossy else real)(stopping, seconds)

    monkeypatch.setattr(reader_module, "nap", nap)
    stream, coordinator, key = await _held_shard(records=2)
    processor = StopsFromInside(napping)
    # A full first page (two records) is read straight on; the empty second page waits
    # in the queue while the fetcher naps for the idle time.
    reader = polling(limit=2, idle_seconds=60)
    consumer = ShardConsumer(key, coordinator, stream, processor, reader=reader)
    processor.consumer = consumer
    async with asyncio.timeout(10):
        outcome = await consumer.run()
    assert outcome.value == "stopped"
    assert processor.calls[-1] == "shutdown_requested"
    assert consumer.state is State.DONE


async def test_a_shard_that_does_not_stop_for_its_hand_off_is_reported_once() -> None:
    """Asked to stop for a hand-off, a shard whose batch never finishes is reported as
    an error after the failover time, once: its receiver waits, and nobody reads it."""
    import structlog

    worker, _, gate = _gated_worker(failover=0.6)
    key = "shardId-000000000000"
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(worker.run())
        await _until(gate.holding.is_set)
        worker.shards.hand_off(key)

        def overdue() -> list[MutableMapping[str, Any]]:
            return [e for e in logs if e["event"] == "shard did not stop for its hand-off"]

        await _until(lambda: bool(overdue()))
        await asyncio.sleep(0.5)  # a few more progress reports: still one error
        assert len(overdue()) == 1
        assert overdue()[0]["log_level"] == "error"
        assert overdue()[0]["state"] == "processing"
        gate.release.set()  # the batch ends: the shard stops
        await _until(lambda: "shutdown_requested" in gate.calls)
        worker.request_stop()
        async with asyncio.timeout(10):
            await task
