"""A model of many workers racing on one lease table, explored with hypothesis.

The real :class:`BoardCoordinator` (beats, the leader's passes, deliveries, hand-offs,
checkpoints) runs against the in-memory store (the same contract as DynamoDB) in
simulated time (:mod:`bench.virtual_time`). Hypothesis chooses the interleaving: one
worker beats, leads, processes, hands off or releases; a worker crashes or a new one
joins; time passes. A worker not scheduled while time passes is paused, as by SIGSTOP
or a long GC; a crashed one never runs again. The protocol's own background waits (a
receiver polling for a hand-off, an owner waiting for its acknowledgement) run while
time passes.

The safety property: at no instant do two workers hold a *valid claim* on one lease,
where a claim is valid while the worker holds the lease (not lost) inside its acting
window (its last successful beat started less than ``stale_after`` ago). That is
exactly the window in which the worker may hand records to a processor
(``ensure_valid``), so no record is ever handed to two processors at once, whatever
the interleaving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench import virtual_time
from consumer.errors import LanderError
from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import RESERVED_PREFIX, LeaseLostError
from consumer.sequence import Position, Sentinel

Action = tuple[str, float | int] | tuple[str, int, float]
FAILOVER = 10.0
RENEW = FAILOVER / 3
SWEEP = 5.0


@dataclass
class Sim:
    """A shared table and the workers' coordinators, in simulated time."""

    store: MemoryLeaseStore
    workers: dict[str, BoardCoordinator] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)
    checkpoints: dict[str, int] = field(default_factory=dict)

    def add_worker(self, name: str) -> None:
        worker = BoardCoordinator(
            self.store, name, FAILOVER, RENEW, sweep_seconds=SWEEP, instance=f"{name}-process"
        )
        worker.on_lost = worker.forget  # as the worker does once the shard's task ends
        self.workers[name] = worker

    def live(self) -> list[str]:
        return [name for name in sorted(self.workers) if name not in self.crashed]

    def valid_claims(self, key: str) -> list[str]:
        claims = []
        for name in self.live():
            worker = self.workers[name]
            held = worker.held.get(key)
            if held is not None and not held.lost and worker.fresh():
                claims.append(name)
        return claims

    def shard_keys(self) -> list[str]:
        return [key for key in self.store.leases or {} if not key.startswith(RESERVED_PREFIX)]

    def assert_safe(self) -> None:
        for key in self.shard_keys():
            claims = self.valid_claims(key)
            assert len(claims) <= 1, f"{key} validly claimed by {claims}"

    async def crash(self, name: str) -> None:
        """Never scheduled again: its own background waits stop with it."""
        self.crashed.add(name)
        await self.workers[name].handoffs.stop()


async def _tolerant(call: Callable[[], Awaitable[object]]) -> None:
    """A pass of the worker's loops: a refused write ends the pass, as it does there."""
    with contextlib.suppress(LanderError):  # LeaseLostError among them
        await call()


async def _hand_off(worker: BoardCoordinator) -> None:
    """Give up every lease a hand-off was asked of (the shard stopped after its batch)."""
    for key, held in list(worker.held.items()):
        if held.handoff_to is not None:
            await _tolerant(lambda key=key: worker.give_up(key, "handoff"))  # type: ignore[misc]


async def _process(sim: Sim, name: str) -> None:
    """The worker processes every lease it believes it holds, then checkpoints."""
    worker = sim.workers[name]
    for key in list(worker.held):
        try:
            await worker.ensure_valid(key)
        except LeaseLostError:
            worker.forget(key)
            continue
        # ensure_valid passed: this worker may hand records to a processor now.
        assert sim.valid_claims(key) == [name]
        sequence = sim.checkpoints.get(key, 0) + 1
        try:
            await worker.checkpoint(key, Position(sequence))
        except LeaseLostError:
            worker.forget(key)
            continue
        sim.checkpoints[key] = sequence


async def _release(worker: BoardCoordinator) -> None:
    for key in list(worker.held):
        await _tolerant(lambda key=key: worker.give_up(key))  # type: ignore[misc]


# A round: time passes, then the workers in the mask run their loops once (beat, hand
# off, lead, process); the others are paused through it. Rounds are most of a history:
# the protocol moves only through them (a fence needs several beats of the leader).
ROUND = st.tuples(st.just("round"), st.integers(0, 2**16 - 1), st.floats(0.1, FAILOVER / 2))
# A pause: one worker is frozen (SIGSTOP, a long GC) for up to 2.5 failover times
# while the others run their loops every half second.
PAUSE = st.tuples(st.just("pause"), st.integers(0, 3), st.floats(0.5, FAILOVER * 2.5))
ACTIONS = st.one_of(
    ROUND,
    ROUND,
    PAUSE,
    st.tuples(st.just("advance"), st.floats(0.01, FAILOVER * 1.5)),
    st.tuples(
        st.sampled_from(["beat", "lead", "handoff", "process", "release"]), st.integers(0, 3)
    ),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("join"), st.integers(0, 1000)),
)


async def _round(sim: Sim, mask: int, seconds: float) -> None:
    await asyncio.sleep(seconds)
    for index, name in enumerate(sorted(sim.workers)):
        if not mask & (1 << index % 16) or name in sim.crashed:
            continue
        worker = sim.workers[name]
        await _tolerant(worker.beat_pass)
        await _hand_off(worker)
        await _tolerant(worker.lead_pass)
        await _process(sim, name)
        sim.assert_safe()


async def _step(sim: Sim, action: Action) -> None:
    if action[0] == "round":
        mask, seconds = action[1], action[-1]
        await _round(sim, int(mask), float(seconds))
        return
    if action[0] == "pause":
        index, seconds = action[1], action[-1]
        frozen = sorted(sim.workers)[int(index) % len(sim.workers)]
        others = sum(1 << i for i, name in enumerate(sorted(sim.workers)) if name != frozen)
        for _ in range(max(1, int(float(seconds) / 0.5))):
            await _round(sim, others, 0.5)
        return
    kind, arg = action[0], action[1]
    if kind == "advance":
        await asyncio.sleep(float(arg))
        return
    if kind == "join":
        sim.add_worker(f"w{len(sim.workers)}")
        return
    names = sorted(sim.workers)
    name = names[int(arg) % len(names)]
    if name in sim.crashed:
        return
    worker = sim.workers[name]
    if kind == "crash":
        await sim.crash(name)
    elif kind == "beat":
        await _tolerant(worker.beat_pass)
    elif kind == "lead":
        await _tolerant(worker.lead_pass)
    elif kind == "handoff":
        await _hand_off(worker)
    elif kind == "process":
        await _process(sim, name)
    elif kind == "release":
        await _release(worker)


async def _settle(sim: Sim, rounds: int) -> None:
    """Every live worker behaves well (beats, hands off, leads) while time passes."""
    for _ in range(rounds):
        await asyncio.sleep(0.5)
        for name in sim.live():
            worker = sim.workers[name]
            await _tolerant(worker.beat_pass)
            await _hand_off(worker)
            await _tolerant(worker.lead_pass)
            sim.assert_safe()


async def _scenario(shards: int, workers: int, actions: list[Action]) -> Sim:
    store = MemoryLeaseStore()
    await store.ensure_table()
    for index in range(shards):
        await store.create_lease(f"shard-{index:03d}", set(), Sentinel.TRIM_HORIZON)
    sim = Sim(store)
    for index in range(workers):
        sim.add_worker(f"w{index}")
    for action in actions:
        await _step(sim, action)
        sim.assert_safe()
    return sim


def _run(main: Callable[[], Awaitable[None]]) -> None:
    async def wrapped() -> None:
        await main()

    virtual_time.run(wrapped(), virtual_time.VirtualClock())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.integers(1, 8),
    workers=st.integers(1, 4),
    actions=st.lists(ACTIONS, max_size=60),
)
def test_no_two_valid_claims_in_any_interleaving(
    shards: int, workers: int, actions: list[Action]
) -> None:
    """Whatever the interleaving, at most one worker may process a lease at a time."""

    async def run() -> None:
        await _scenario(shards, workers, actions)

    _run(run)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.integers(1, 8),
    workers=st.integers(1, 4),
    actions=st.lists(ACTIONS, max_size=40),
)
# Found by this test: a hand-off asked of a receiver that is then paused past the
# failover time, fenced, and joins again under its id. Its new slot's incoming list is
# empty, so it never acknowledged, and the plan counted the request as a move made:
# the fleet stayed 2/0 for ever until the leader delivered the request again.
@example(
    shards=2,
    workers=1,
    actions=[
        ("round", 1, 1.0),
        ("join", 0),
        ("round", 2, 1.0),
        ("pause", 1, 5.0),
        ("round", 0, 5.0),
    ],
)
# Found with per-worker slots: a hand-off asked of a worker that was then paused for
# two failover times (fenced, joined again) was given up when its re-delivery came due
# while the receiver had no slot yet, and the plan counted it as made for ever.
@example(shards=3, workers=3, actions=[("round", 5, 1.0), ("pause", 2, 20.0)])
def test_live_workers_converge_to_a_balanced_full_assignment(
    shards: int, workers: int, actions: list[Action]
) -> None:
    """After any history, well-behaved live workers end up owning every lease, balanced.

    Crashed workers' slots stand still, the leader fences them and gives their leases
    out; hand-offs move leases from the most loaded worker until no two live workers
    differ by more than one lease.
    """

    async def run() -> None:
        sim = await _scenario(shards, workers, actions)
        live = sim.live()
        if not live:
            sim.add_worker("late")
            live = ["late"]
        await _settle(sim, rounds=int(6 * FAILOVER / 0.5) + 4 * shards)
        held = {name: set(sim.workers[name].held) for name in live}
        owned = set().union(*held.values())
        assert owned == set(sim.shard_keys()), held
        counts = sorted(len(keys) for keys in held.values())
        assert counts[-1] - counts[0] <= 1, held

    _run(run)


def test_zombie_after_pause_loses_its_leases_before_processing() -> None:
    """A worker paused past the failover time cannot process once it wakes up."""

    async def run() -> None:
        sim = await _scenario(2, 1, [("beat", 0), ("lead", 0), ("beat", 0)])
        assert set(sim.workers["w0"].held) == {"shard-000", "shard-001"}
        sim.add_worker("w1")
        # w0 is frozen; w1 beats and leads once w0's slot has stood still.
        for _ in range(int(3 * FAILOVER / 0.5)):
            await asyncio.sleep(0.5)
            await _tolerant(sim.workers["w1"].beat_pass)
            await _tolerant(sim.workers["w1"].lead_pass)
            sim.assert_safe()
        assert set(sim.workers["w1"].held) == {"shard-000", "shard-001"}
        # w0 wakes up and tries to process: both leases are found lost first.
        await _process(sim, "w0")
        assert sim.workers["w0"].held == {}

    _run(run)
