"""The worker on the in-memory stream and lease store: fast checks of its supervision."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Set
from dataclasses import dataclass, field

import pytest

from consumer.config import load_settings
from consumer.leases.coordinator import HeldLease
from consumer.leases.foreign import ForeignWorkersError
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease, ShardLoad
from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    ProcessRecordsInput,
    RecordProcessor,
)
from consumer.lifecycle.shard_consumer import ShardProgress
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.sequence import Checkpoint, Position, Sentinel
from consumer.stream import RecordsPage, ThrottledError
from consumer.stream.memory import MemoryStream
from tests.support.simtime import simulated

FAST = {
    "failover_seconds": 2.0,
    "shard_sync_seconds": 0.2,
    "poll_idle_seconds": 0.2,
    "shutdown_seconds": 3.0,
}


@dataclass
class Journal:
    """What every processor instance of a worker saw."""

    delivered: list[tuple[str, Position, bytes]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    fail_first: int = 0


class JournalProcessor:
    """Records deliveries; optionally raises on its first ``fail_first`` batches."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.shard = "?"

    async def initialize(self, init: InitializationInput) -> None:
        self.shard = init.shard_id
        self.journal.calls.append((self.shard, "initialize"))

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        for record in batch.records:
            self.journal.delivered.append((self.shard, record.position, record.data))
        if batch.records and self.journal.fail_first > 0:
            self.journal.fail_first -= 1
            raise RuntimeError("processor bug")
        await batch.checkpointer.checkpoint()

    async def lease_lost(self) -> None:
        self.journal.calls.append((self.shard, "lease_lost"))

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        self.journal.calls.append((self.shard, "shard_ended"))

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        await checkpointer.checkpoint()
        self.journal.calls.append((self.shard, "shutdown_requested"))


def _worker(
    stream: MemoryStream, store: MemoryLeaseStore, journal: Journal, name: str = "w1"
) -> Worker:
    settings = load_settings(stream="s", lease_table="leases", worker_id=name, **FAST)
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(journal)  # noqa: E731
    return Worker(settings, store, stream, factory)


def _keyed_stream(shards: int, records: int) -> MemoryStream:
    """A stream of ``records`` records ``0``, ``1``, ... under keys ``key-0``, ..."""
    stream = MemoryStream(shards)
    for i in range(records):
        stream.put(f"{i}".encode(), f"key-{i}")
    return stream


async def _until(predicate: Callable[[], bool], timeout: float = 15) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


@simulated
async def test_processor_failure_restarts_the_shard_from_its_checkpoint() -> None:
    """A processor that raises is restarted; records come again, none is skipped."""
    stream = MemoryStream(1)
    sequences = [stream.put(f"{i}".encode(), "k")[1] for i in range(10)]
    store, journal = MemoryLeaseStore(), Journal(fail_first=1)
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())

    def delivered() -> set[int]:
        return {p.sequence for _, p, _ in journal.delivered}

    await _until(lambda: set(sequences) <= delivered() and len(journal.delivered) > 10)
    worker.request_stop()
    await task
    assert [p.sequence for _, p, _ in journal.delivered].count(sequences[0]) == 2
    assert journal.calls.count(("shardId-000000000000", "initialize")) == 2


@simulated
async def test_shutdown_checkpoints_and_releases_every_lease() -> None:
    """A graceful stop calls shutdown_requested, checkpoints, and leaves no owner."""
    stream = _keyed_stream(3, 30)
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) == 30)
    worker.request_stop()
    await asyncio.wait_for(task, 10)
    leases = await store.list_leases()
    assert all(lease.owner is None for lease in leases)
    assert all(isinstance(lease.checkpoint, Position) for lease in leases)
    assert sorted(s for s, call in journal.calls if call == "shutdown_requested") == sorted(
        lease.key for lease in leases
    )


@simulated
async def test_a_lease_handed_over_just_before_a_stop_is_passed_on_not_left_to_expire() -> None:
    """A hand-off lands (the table names this worker) but the worker stops before it
    takes the lease: the stop releases it, so no one waits the failover time."""
    stream = MemoryStream(2)
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(worker.coordinator.held) == 2)
    # Another worker's lease, handed to this one behind its back (as a transfer does).
    await store.create_lease("shardId-other", frozenset(), Sentinel.TRIM_HORIZON)
    (other,) = [lease for lease in await store.list_leases() if lease.key == "shardId-other"]
    taken = await store.take(other, "w2")
    asked = await store.request_handoff(taken, "w1")
    assert asked
    (current,) = [lease for lease in await store.list_leases() if lease.key == "shardId-other"]
    worker.request_stop()  # before it could take what is coming
    await store.transfer(current, "w1")
    await asyncio.wait_for(task, 10)
    assert all(lease.owner is None for lease in await store.list_leases())


@simulated
async def test_shard_end_is_checkpointed_and_children_follow_their_parent() -> None:
    """A split parent is read to its end, checkpointed SHARD_END, then its children."""
    stream = MemoryStream(1)
    parent = "shardId-000000000000"
    before = [stream.put(f"p{i}".encode(), f"k{i}")[1] for i in range(20)]
    left, right = stream.split(parent, 2**127)
    after = [stream.put(f"c{i}".encode(), f"k{i}")[1] for i in range(20)]
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) == 40)
    worker.request_stop()
    await asyncio.wait_for(task, 10)
    order = [shard for shard, _, _ in journal.delivered]
    last_parent = max(i for i, shard in enumerate(order) if shard == parent)
    first_child = min(i for i, shard in enumerate(order) if shard in (left, right))
    assert last_parent < first_child
    assert (parent, "shard_ended") in journal.calls
    leases = {lease.key: lease for lease in await store.list_leases()}
    assert leases[parent].checkpoint is Sentinel.SHARD_END
    assert isinstance(leases[left].checkpoint, Position)
    assert isinstance(leases[right].checkpoint, Position)
    assert {p.sequence for _, p, _ in journal.delivered} == set(before) | set(after)


@simulated
async def test_a_second_worker_gets_its_share_by_hand_off_with_no_redelivery() -> None:
    """Two workers on four shards end 2/2, and no record reaches two processors."""
    stream = MemoryStream(4)
    store, journal = MemoryLeaseStore(), Journal()
    first = _worker(stream, store, journal, "w1")
    one = asyncio.create_task(first.run())
    await _until(lambda: len(first.coordinator.held) == 4)
    second = _worker(stream, store, journal, "w2")
    two = asyncio.create_task(second.run())
    for i in range(200):
        stream.put(f"{i}".encode(), f"key-{i}")
        await asyncio.sleep(0.005)
    await _until(lambda: len(first.coordinator.held) == 2 and len(second.coordinator.held) == 2)
    await _until(lambda: len(journal.delivered) >= 200)
    await asyncio.sleep(0.5)
    first.request_stop()
    second.request_stop()
    await asyncio.gather(one, two)
    positions = [(shard, p) for shard, p, _ in journal.delivered]
    assert len(positions) == len(set(positions)) == 200


@simulated
async def test_a_worker_refuses_a_table_where_another_application_renews_leases() -> None:
    """A KCL application (or an earlier release) that renews its leases would read the
    same shards as the fleet: a worker refuses to start beside it, with one line saying
    so; once it has stopped, a worker adopts its leases after the failover time."""
    stream = MemoryStream(2)
    store, journal = MemoryLeaseStore(), Journal()
    await store.ensure_table()
    for shard in await stream.list_shards():
        await store.create_lease(shard.shard_id, frozenset(), Sentinel.TRIM_HORIZON)
        lease = await store.get_lease(shard.shard_id)
        assert lease is not None
        await store.take(lease, "kcl-1")
    stop_renewing = asyncio.Event()

    async def renew() -> None:  # as KCL's lease renewer: counter + 1, every 0.3 s
        while not stop_renewing.is_set():
            for lease in await store.list_leases():
                if lease.owner == "kcl-1":
                    await store.renew(lease)
            await asyncio.sleep(0.3)

    renewer = asyncio.create_task(renew())
    worker = _worker(stream, store, journal, "w1")
    with pytest.raises(ForeignWorkersError, match=r"renew their leases.*kcl-1"):
        await asyncio.wait_for(worker.run(), 10)
    stop_renewing.set()
    await renewer
    adopter = _worker(stream, store, journal, "w2")
    task = asyncio.create_task(adopter.run())
    await _until(lambda: len(adopter.coordinator.held) == 2)
    adopter.request_stop()
    await task


@simulated
async def test_a_lease_given_without_its_delivery_is_found_by_the_sweep() -> None:
    """A lease names a worker but the note on its slot was lost (a
    take refused, a delivery dropped): the leader's next sweep sees more leases naming
    the worker than it holds and notifies it, and it takes the lease."""
    stream = MemoryStream(2)
    store, journal = MemoryLeaseStore(), Journal()
    settings = load_settings(
        stream="s", lease_table="leases", worker_id="w1", lease_sweep_seconds=0.5, **FAST
    )
    worker = Worker(settings, store, stream, lambda: JournalProcessor(journal))
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(worker.coordinator.held) == 2)
    await store.create_lease("shardId-extra", frozenset(), Sentinel.TRIM_HORIZON)
    extra = await store.get_lease("shardId-extra")
    assert extra is not None
    await store.take(extra, "w1")  # named, never delivered
    await _until(lambda: "shardId-extra" in worker.coordinator.held, timeout=10)
    worker.request_stop()
    await asyncio.wait_for(task, 10)


@simulated
async def test_each_shards_measured_load_is_written_with_its_checkpoints() -> None:
    """A worker measures each shard's records and KB a second and writes them with its
    checkpoints: what the leader balances by (and KCL 3.x's throughputKBps)."""
    stream = MemoryStream(2)
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(worker.coordinator.held) == 2)
    for i in range(150):
        stream.put(b'{"pad": "' + b"x" * 500 + b'"}', f"key-{i}")
        await asyncio.sleep(0.02)
    await _until(lambda: len(journal.delivered) == 150)
    worker.request_stop()
    await asyncio.wait_for(task, 10)
    loads = [lease.load for lease in await store.list_leases()]
    assert all(load is not None for load in loads), loads
    assert sum(load.records_per_second for load in loads if load) > 5
    assert sum(load.kb_per_second for load in loads if load) > 2


class ThrottlingStream(MemoryStream):
    """A memory stream whose first few GetRecords calls are throttled."""

    def __init__(self, shards: int, throttles: int) -> None:
        super().__init__(shards)
        self.throttles = throttles

    async def get_records(self, iterator: str, limit: int) -> RecordsPage:
        if self.throttles > 0:
            self.throttles -= 1
            raise ThrottledError("ProvisionedThroughputExceededException")
        return await super().get_records(iterator, limit)


@simulated
async def test_lease_read_and_health_metrics_follow_what_happens() -> None:
    """Takes, hand-offs, the leader's balancing requests, a fenced-out lease,
    throttles, lag and readiness each show in the series an operator alerts on."""
    stream = ThrottlingStream(4, throttles=3)
    store, journal = MemoryLeaseStore(), Journal()
    settings = load_settings(stream="s", lease_table="leases", worker_id="w1", **FAST)
    m1, m2 = LanderMetrics(), LanderMetrics()
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(journal)  # noqa: E731
    first = Worker(settings, store, stream, factory, metrics=m1)
    assert not first.health().alive
    one = asyncio.create_task(first.run())
    await _until(lambda: len(first.coordinator.held) == 4)
    await _until(lambda: first.health().ready)
    assert m1.value("lander_leases_taken", how="assigned") == 4
    assert m1.registry.get_sample_value("lander_leases_held") == 4
    for i in range(40):
        stream.put(f"{i}".encode(), f"key-{i}")
    await _until(lambda: len(journal.delivered) >= 40)
    throttled = sum(
        m1.value("lander_getrecords_throttles", shard_id=f"shardId-{n:012d}") for n in range(4)
    )
    assert throttled == 3
    read = sum(m1.value("lander_records_read", shard_id=f"shardId-{n:012d}") for n in range(4))
    assert read == 40
    assert (
        m1.registry.get_sample_value(
            "lander_behind_latest_seconds",
            {"stream": m1.stream, "shard_id": "shardId-000000000000"},
        )
        is not None
    )

    second = Worker(
        settings.model_copy(update={"worker_id": "w2"}), store, stream, factory, metrics=m2
    )
    two = asyncio.create_task(second.run())
    await _until(lambda: len(second.coordinator.held) == 2 and len(first.coordinator.held) == 2)
    assert m1.value("lander_leases_stolen") >= 2  # w1 leads: it asked for the hand-offs
    assert m2.value("lander_leases_taken", how="assigned") == 2
    assert m1.value("lander_leases_released", why="handoff") == 2

    # An operator (or a zombie's successor) takes one of w2's leases behind its back:
    # w2's next checkpoint there is refused (fenced by owner and counter).
    assert store.leases is not None
    key = sorted(second.coordinator.held)[0]
    current = store.leases[key]
    store.leases[key] = current.evolve(owner="w3", counter=current.counter + 1)
    for i in range(40, 120):
        stream.put(f"{i}".encode(), f"key-{i}")
    await _until(lambda: m2.value("lander_leases_lost") == 1)

    first.request_stop()
    assert not first.health().ready
    second.request_stop()
    await asyncio.gather(one, two)
    assert m1.registry.get_sample_value("lander_leases_held") == 0
    assert m1.value("lander_leases_released", why="shutdown") == 2
    assert not first.health().alive


@simulated
async def test_a_processor_that_fails_to_construct_is_retried_not_left_stuck() -> None:
    """A factory that raises once: the shard is read after a back-off, not held unread."""
    stream = MemoryStream(1)
    store, journal = MemoryLeaseStore(), Journal()
    settings = load_settings(stream="s", lease_table="leases", worker_id="w1", **FAST)
    calls = 0

    def factory() -> RecordProcessor:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("cannot connect to the sink")
        return JournalProcessor(journal)

    worker = Worker(settings, store, stream, factory)
    task = asyncio.create_task(worker.run())
    for i in range(5):
        stream.put(f"{i}".encode(), "k")
    await _until(lambda: len(journal.delivered) == 5)
    worker.request_stop()
    await task
    assert calls >= 2


@simulated
async def test_a_shards_load_is_measured_over_several_polls_from_what_its_lease_carries() -> None:
    """A lease that just moved weighs what it weighed before: the new owner smooths
    from the load the lease carries, and measures over at least five idle polls (a
    one-second beat holds zero, one or two polls' worth of records)."""
    settings = load_settings(
        stream="s", lease_table="leases", worker_id="w1", poll_idle_seconds=1.0
    )
    factory: Callable[[], RecordProcessor] = lambda: JournalProcessor(Journal())  # noqa: E731
    worker = Worker(settings, MemoryLeaseStore(), MemoryStream(1), factory)
    key = "shardId-000000000000"
    carried = ShardLoad(records_per_second=100.0, kb_per_second=50.0)
    worker.coordinator.held[key] = HeldLease(Lease(key, owner="w1", load=carried), 0.0)
    progress = ShardProgress()
    worker.shards.measure_load(key, progress, 0.0)
    progress.records_read, progress.bytes_read = 40, 20 * 1024
    worker.shards.measure_load(key, progress, 1.0)  # one beat: not a measure
    assert key not in worker.coordinator.loads
    worker.shards.measure_load(key, progress, 5.0)  # five polls with 40 records: 8 a second
    load = worker.coordinator.loads[key]
    assert load.records_per_second == pytest.approx(100 + 0.3 * (8 - 100))
    assert load.kb_per_second == pytest.approx(50 + 0.3 * (4 - 50))


class TableGoesAtStart(MemoryLeaseStore):
    """A table deleted right after the starting worker created it (the process test's
    race: the lease table deleted while a second worker was still starting)."""

    def __init__(self) -> None:
        super().__init__()
        self.drops = 1

    async def ensure_table(self) -> None:
        await super().ensure_table()
        if self.drops:
            self.drops -= 1
            self.drop_table()


@simulated
async def test_a_table_deleted_while_the_worker_starts_is_created_again() -> None:
    """The worker's start-up (the check for other applications, the id's claim) finds
    the table gone: it creates it again and starts, instead of ending with
    TableMissingError."""
    stream = _keyed_stream(2, 10)
    store, journal = TableGoesAtStart(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) == 10)
    assert store.drops == 0
    worker.request_stop()
    async with asyncio.timeout(10):
        await task


@simulated
async def test_a_lease_made_again_at_the_same_counter_is_read_from_its_start() -> None:
    """The lease table made again behind a worker's back, with leases naming that worker
    at the very counters it holds (the race a CI run lost: a worker kept reading a lease
    of the deleted table, its new lease given to it before it heard of the deletion).
    The new leases' incarnations differ: the worker's next checkpoint is refused, it
    drops the lease, takes the new one and reads the shard from its initial position."""
    stream = _keyed_stream(2, 10)
    store, journal = MemoryLeaseStore(), Journal()
    worker = _worker(stream, store, journal, "w1")
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) == 10)
    assert store.leases is not None
    store.leases = {
        key: Lease(key, owner=lease.owner, counter=lease.counter, incarnation="again")
        for key, lease in store.leases.items()
    }
    for i in range(10, 20):
        stream.put(f"{i}".encode(), f"key-{i}")
    every = {b"%d" % i for i in range(20)}
    # The new records may come first from the old lease, refused at its checkpoint.
    await _until(lambda: {data for _, _, data in journal.delivered[10:]} == every)
    assert all(lease.incarnation == "again" for lease in store.leases.values())
    worker.request_stop()
    async with asyncio.timeout(10):
        await task


class CreatedByAnother(MemoryLeaseStore):
    """Every lease is created by another worker just before this one tries, so each of
    its creations is refused: the race of a new leader with the worker that led before
    it, both rebuilding a deleted table."""

    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        await super().create_lease(key, parents, checkpoint)
        return False


@simulated
async def test_leases_another_worker_created_are_given_without_waiting_a_sweep() -> None:
    """The leader's creations are refused because the leases exist: its view is behind
    the table, so it sweeps again at once and gives them, instead of retrying against
    that view until the sweep interval (a minute) runs out."""
    stream = _keyed_stream(2, 10)
    store, journal = CreatedByAnother(), Journal()
    worker = _worker(stream, store, journal, "w1")
    assert worker.settings.lease_sweep_seconds >= 60
    task = asyncio.create_task(worker.run())
    await _until(lambda: len(journal.delivered) == 10, timeout=10)
    worker.request_stop()
    async with asyncio.timeout(10):
        await task
