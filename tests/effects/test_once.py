"""Effects run once per key (consumer.effects.once), on the in-memory fake and on
DynamoDB: the stored result on a repeat, a claim taken over at once by the lease's next
holder (run again under its key, or recorded unknown and never run again), a zombie
that can neither claim nor complete, a reused key, an effect that did not happen, and
expiry honoured on read."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from consumer.config import load_settings
from consumer.effects import EffectNotDone, Effects, Mode, NoKeyError
from consumer.effects.dynamo import DynamoEffectStore
from consumer.effects.memory import MemoryEffectStore
from consumer.effects.model import State
from consumer.effects.store import EffectStoreError
from consumer.errors import RefusedError
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import LeaseLostError
from consumer.lifecycle.preflight import PreflightError, Target, _check_probe
from consumer.lifecycle.processor import Checkpointer, ProcessRecordsInput
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.sequence import Position
from consumer.stream.memory import MemoryStream
from consumer.stream.records import Record
from tests.effects.conftest import Bench
from tests.support.simtime import simulated

NOW = 1_800_000_000.0


class Downstream:
    """A side effect that counts its calls per key."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.fail: type[BaseException] | None = None

    async def __call__(self, key: str) -> dict[str, Any]:
        self.calls[key] += 1
        if self.fail is not None:
            raise self.fail("downstream refused")
        return {"receipt": f"r-{key}", "n": self.calls[key]}


def _effects(bench: Bench, clock: list[float] | None = None) -> Effects:
    now = clock or [NOW]
    return Effects(
        bench.effects,
        ttl_seconds=3600,
        event_id_pointer="/event_id",
        metrics=LanderMetrics(),
        clock=lambda: now[0],
    )


def _record(event_id: str | None, body: str = "x") -> Record:
    tail = "" if event_id is None else f', "event_id": "{event_id}"'
    payload = f'{{"body": "{body}"{tail}}}'
    return Record("shardId-000000000000", Position(1), "pk", payload.encode(), None)  # type: ignore[arg-type]


async def test_a_repeat_returns_the_stored_result(bench: Bench) -> None:
    held = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    first = effects.shard()
    done = await first.record(held, _record("e1"), down)
    assert (done.status, done.result) == ("done", {"receipt": "r-e1", "n": 1})
    again = await first.record(held, _record("e1"), down)  # within the run: from memory
    assert (again.status, again.result) == ("repeat", done.result)
    await held.checkpoint()  # the worker's own lease writes move its fence along
    later = await effects.shard().record(held, _record("e1"), down)  # a new run: the table
    assert (later.status, later.result) == ("repeat", done.result)
    assert down.calls == {"e1": 1}
    assert effects.metrics is not None
    assert effects.metrics.value("lander_effects", outcome="done") == 1
    assert effects.metrics.value("lander_effects", outcome="repeat") == 2


async def test_a_claim_left_in_progress_is_taken_over_at_once(bench: Bench) -> None:
    """The holder crashed mid-effect. The lease's next holder does not wait for a
    timeout: keyed, it runs the effect again under the same key; at most once, it
    records the outcome unknown and never runs it."""
    crashed = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    down.fail = asyncio.CancelledError  # killed in the middle of the call
    for key in ("keyed", "plain"):
        with pytest.raises(asyncio.CancelledError):
            await effects.shard().record(crashed, _record(key), down, key=key)
    down.fail = None
    owner = await bench.hold("w2")
    keyed = await effects.shard().record(owner, _record("keyed"), down, key="keyed")
    assert keyed.status == "done"
    plain = effects.shard()
    unknown = await plain.record(owner, _record("plain"), down, key="plain", mode=Mode.AT_MOST_ONCE)
    assert unknown.unknown
    assert down.calls == {"keyed": 2, "plain": 1}  # the second "keyed" call is the retry
    record = await bench.effects.read("plain")
    assert record is not None
    assert record.state is State.UNKNOWN
    # Unknown stays unknown, in any mode: never run again without a person.
    for mode in Mode:
        assert (
            await effects.shard().run(owner, "plain", _record("plain").data, down, mode=mode)
        ).unknown
    assert down.calls["plain"] == 1


async def test_a_worker_that_lost_the_lease_can_neither_claim_nor_complete(
    bench: Bench,
) -> None:
    zombie = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(key: str) -> dict[str, Any]:
        started.set()
        await release.wait()  # paused past its failover, as by SIGSTOP
        return await down(key)

    paused = asyncio.create_task(effects.shard().record(zombie, _record("e1"), slow))
    await started.wait()
    owner = await bench.hold("w2")
    taken = await effects.shard().record(owner, _record("e1"), down)
    assert taken.status == "done"
    release.set()
    with pytest.raises(LeaseLostError):
        await paused  # its effect ran (the downstream saw the key twice), its completion not
    with pytest.raises(LeaseLostError):
        await effects.shard().record(zombie, _record("e2"), down)
    assert down.calls == {"e1": 2}  # the same key both times: a keyed downstream charges once
    assert "e2" not in down.calls
    record = await bench.effects.read("e1")
    assert record is not None
    assert (record.state, record.tenure.owner) == (State.COMPLETED, "w2")


async def test_an_effect_that_raises(bench: Bench) -> None:
    """EffectNotDone releases the claim: the next delivery runs it. Any other error:
    keyed, raised, and run again by the next delivery; at most once, unknown."""
    held = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    down.fail = EffectNotDone
    with pytest.raises(EffectNotDone):
        await effects.shard().record(held, _record("a"), down)
    assert await bench.effects.read("a") is None
    down.fail = ConnectionError
    with pytest.raises(ConnectionError):
        await effects.shard().record(held, _record("b"), down)
    outcome = await effects.shard().record(held, _record("c"), down, mode=Mode.AT_MOST_ONCE)
    assert outcome.unknown
    down.fail = None
    assert (await effects.shard().record(held, _record("a"), down)).status == "done"
    assert (await effects.shard().record(held, _record("b"), down)).status == "done"
    assert (await effects.shard().record(held, _record("c"), down)).unknown
    assert down.calls == {"a": 2, "b": 2, "c": 1}


async def test_a_reused_key_and_a_record_without_a_key(bench: Bench) -> None:
    held = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    assert (await effects.shard().record(held, _record("e1", "first"), down)).status == "done"
    reused = await effects.shard().record(held, _record("e1", "other"), down)
    assert reused.status == "reused"
    assert down.calls == {"e1": 1}
    # A record without an event id (or not JSON) is not run, and never stalls the
    # shard: an outcome the processor sees, logged and counted.
    missing = await effects.shard().record(held, _record(None), down)
    assert (missing.status, missing.key) == ("no_key", "")
    bad = Record("shardId-000000000000", Position(2), "pk", b"\xff not json", None)  # type: ignore[arg-type]
    assert (await effects.shard().record(held, bad, down)).status == "no_key"
    assert down.calls == {"e1": 1}
    assert effects.metrics is not None
    counted = effects.metrics.registry.get_sample_value(
        "lander_effects_total", {"outcome": "no_key"}
    )
    assert counted == 2
    # Without any pointer it is the processor's configuration: said at the first record.
    unkeyed = Effects(bench.effects, metrics=LanderMetrics())
    with pytest.raises(NoKeyError, match="need LANDER_EVENT_ID_POINTER"):
        await unkeyed.shard().record(held, _record("e2"), down)


async def test_expiry_is_honoured_on_read(bench: Bench) -> None:
    """TTL deletes late: a record past its expiry counts as none."""
    held = await bench.hold("w1")
    clock = [NOW]
    effects, down = _effects(bench, clock), Downstream()
    await effects.shard().record(held, _record("e1"), down)
    clock[0] += 3599
    assert (await effects.shard().record(held, _record("e1"), down)).status == "repeat"
    clock[0] += 2
    assert (await effects.shard().record(held, _record("e1"), down)).status == "done"
    assert down.calls == {"e1": 2}


async def test_one_key_twice_at_once_in_one_shard_runs_once(bench: Bench) -> None:
    held = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    once = effects.shard()
    outcomes = await asyncio.gather(*(once.record(held, _record("e1"), down) for _ in range(5)))
    assert sorted(o.status for o in outcomes) == ["done", "repeat", "repeat", "repeat", "repeat"]
    assert down.calls == {"e1": 1}


@simulated
async def test_a_worker_s_processor_redelivered_after_a_failure_repeats_nothing() -> None:
    """In a worker: the processor runs each record's effect, then fails before its
    checkpoint on the first two batches; the shard restarts from its checkpoint and the
    redelivered records return their stored results. Every effect ran once."""
    stream = MemoryStream(1)
    for i in range(40):
        stream.put(f'{{"event_id": "e{i}"}}'.encode(), f"k{i}")
    leases = MemoryLeaseStore()
    effects = Effects(MemoryEffectStore(leases), event_id_pointer="/event_id")
    down, failures, outcomes = Downstream(), [2], Counter[str]()

    class Charges:
        def __init__(self) -> None:
            self.once = effects.shard()

        async def initialize(self, init: object) -> None: ...

        async def process_records(self, batch: ProcessRecordsInput) -> None:
            for record in batch.records:
                outcomes[(await self.once.record(batch.checkpointer, record, down)).status] += 1
            if batch.records and failures[0]:
                failures[0] -= 1
                raise RuntimeError("after the effects, before the checkpoint")
            await batch.checkpointer.checkpoint()

        async def lease_lost(self) -> None: ...
        async def shard_ended(self, checkpointer: Checkpointer) -> None: ...
        async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
            await checkpointer.checkpoint()

    settings = load_settings(
        stream="s",
        lease_table="leases",
        worker_id="w1",
        failover_seconds=2.0,
        shard_sync_seconds=0.2,
        poll_idle_seconds=0.2,
        max_records_per_call=10,
    )
    worker = Worker(settings, leases, stream, Charges)
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(60):
        while sum(down.calls.values()) < 40 or outcomes["repeat"] < 10:
            await asyncio.sleep(0.1)
    worker.request_stop()
    await asyncio.wait_for(task, 15)
    assert down.calls == {f"e{i}": 1 for i in range(40)}
    assert outcomes["done"] == 40
    assert outcomes["repeat"] >= 10  # the redelivered batches


class LosesAnswers:
    """A store whose first write of each kind goes through but answers with an error,
    as a connection that drops after the request: the client retries."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.lost: set[str] = set()

    async def check(self) -> None:
        await self.store.check()

    async def read(self, key: str) -> Any:
        return await self.store.read(key)

    async def write(self, effect: Any, fence: Any, *, over: Any) -> None:
        await self.store.write(effect, fence, over=over)
        if effect.state.value not in self.lost:
            self.lost.add(effect.state.value)
            # botocore's retry of the same request meets its own write: refused
            await self.store.write(effect, fence, over=over)

    async def release(self, effect: Any) -> bool:
        released: bool = await self.store.release(effect)
        return released


@pytest.mark.parametrize("mode", list(Mode))
async def test_a_write_whose_answer_was_lost_is_not_mistaken_for_a_gone_claimant(
    bench: Bench, mode: Mode
) -> None:
    """The chaos proxy's "lost" fault: the claim and the completion each go through and
    their retries are refused. The effect still runs once and says done, in either mode
    (never unknown: its claim was this run's own, its effect not started)."""
    held = await bench.hold("w1")
    effects, down = _effects(bench), Downstream()
    losing = LosesAnswers(bench.effects)
    effects.store = losing
    outcome = await effects.shard().record(held, _record("e1"), down, mode=mode)
    assert (outcome.status, down.calls) == ("done", {"e1": 1})
    assert losing.lost == {"IN_PROGRESS", "COMPLETED"}


async def test_the_start_up_probe(bench: Bench) -> None:
    """The probe makes and reads the table; a table that cannot be used refuses the
    start in one line."""
    await _effects(bench).probe()
    if isinstance(bench.effects, DynamoEffectStore):
        client = bench.effects._client
        ttl = await client.describe_time_to_live(TableName=bench.effects.table)
        assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] in ("ENABLED", "ENABLING")
        assert ttl["TimeToLiveDescription"]["AttributeName"] == "expiresAt"

    class Refusing(LosesAnswers):
        table = "orders-leases-effects"

        async def check(self) -> None:
            raise EffectStoreError("DynamoDB AccessDeniedException: not allowed", retriable=False)

    refused = Effects(Refusing(bench.effects))
    with pytest.raises(RefusedError) as caught:
        await refused.probe()
    assert str(caught.value) == (
        "effects table orders-leases-effects is not usable: DynamoDB AccessDeniedException: "
        "not allowed"
    )


async def test_a_custom_processor_s_failed_probe_is_not_called_an_archive() -> None:
    """A processor without an archive whose probe fails (its effects table, its
    downstream) refuses the start with the probe's own cause, not "the archive None"."""
    target = Target("orders", "http://k", "orders-leases", "http://d", archive=None)

    async def probe() -> None:
        raise ConnectionError("downstream refused the connection")

    with pytest.raises(PreflightError) as refused:
        await _check_probe(target, probe)
    assert str(refused.value) == (
        "the processor's start-up probe failed: ConnectionError: downstream refused the connection"
    )
