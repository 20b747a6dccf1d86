"""A model of many workers racing on one lease table, explored with hypothesis.

The real :class:`LeaseCoordinator` and decision code run against the in-memory store
(the same contract as DynamoDB) with a simulated clock. Hypothesis chooses the
interleaving: scans, renewals, hand-offs, checkpoints, pauses (a worker simply not
scheduled while time passes, like SIGSTOP), crashes and time jumps.

The safety property: at no instant do two workers hold a *valid claim* on one lease,
where a claim is valid while the worker holds the lease and its last successful
fenced write started less than ``failover`` seconds ago. That is exactly the window in
which the worker may hand records to a processor (``ensure_valid``), so it means no
record is ever handed to two processors at once, whatever the interleaving.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.leases.coordinator import LeaseCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import LeaseLostError
from consumer.sequence import Position, Sentinel

FAILOVER = 10.0
RENEW = FAILOVER / 3


@dataclass
class Sim:
    """A shared table, a shared clock, and the workers' coordinators."""

    store: MemoryLeaseStore
    now: float = 0.0
    workers: dict[str, LeaseCoordinator] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)
    checkpoints: dict[str, int] = field(default_factory=dict)

    def add_worker(self, name: str, seed: int) -> None:
        self.workers[name] = LeaseCoordinator(
            self.store, name, FAILOVER, RENEW, clock=lambda: self.now, rng=random.Random(seed)
        )

    def valid_claims(self, key: str) -> list[str]:
        claims = []
        for name, coordinator in self.workers.items():
            held = coordinator.held.get(key)
            if name in self.crashed or held is None or held.lost:
                continue
            if self.now - held.renewed_at < FAILOVER:
                claims.append(name)
        return claims

    def assert_safe(self) -> None:
        for key in self.store.leases or {}:
            claims = self.valid_claims(key)
            assert len(claims) <= 1, f"{key} validly claimed by {claims} at t={self.now}"


async def _pass(coordinator: LeaseCoordinator) -> None:
    await coordinator.lease_pass()


async def _renew(coordinator: LeaseCoordinator) -> None:
    lost, _ = await coordinator.renew_all()
    for key in lost:
        coordinator.forget(key)


async def _hand_off(coordinator: LeaseCoordinator) -> None:
    for key, held in list(coordinator.held.items()):
        if held.handoff_to is not None:
            await coordinator.give_up(key)


async def _process(sim: Sim, name: str) -> None:
    """The worker processes every lease it believes it holds, then checkpoints."""
    coordinator = sim.workers[name]
    for key in list(coordinator.held):
        try:
            await coordinator.ensure_valid(key)
        except LeaseLostError:
            coordinator.forget(key)
            continue
        # ensure_valid passed: this worker may hand records to a processor now.
        assert sim.valid_claims(key) == [name]
        sequence = sim.checkpoints.get(key, 0) + 1
        try:
            await coordinator.checkpoint(key, Position(sequence))
        except LeaseLostError:
            coordinator.forget(key)
            continue
        sim.checkpoints[key] = sequence


ACTIONS = st.one_of(
    st.tuples(st.just("advance"), st.floats(0.01, FAILOVER * 1.5)),
    st.tuples(
        st.sampled_from(["pass", "renew", "handoff", "process", "release"]), st.integers(0, 3)
    ),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("join"), st.integers(0, 1000)),
)


async def _step(sim: Sim, action: tuple[str, float | int]) -> None:
    kind, arg = action
    if kind == "advance":
        sim.now += float(arg)
        return
    if kind == "join":
        sim.add_worker(f"w{len(sim.workers)}", int(arg))
        return
    names = sorted(sim.workers)
    name = names[int(arg) % len(names)]
    if name in sim.crashed:
        return
    coordinator = sim.workers[name]
    if kind == "crash":
        sim.crashed.add(name)
    elif kind == "pass":
        await _pass(coordinator)
    elif kind == "renew":
        await _renew(coordinator)
    elif kind == "handoff":
        await _hand_off(coordinator)
    elif kind == "process":
        await _process(sim, name)
    elif kind == "release":
        for key in list(coordinator.held):
            await coordinator.give_up(key)


async def _settle(sim: Sim, rounds: int) -> None:
    """Every live worker behaves well (renew, hand off, scan) while time passes."""
    for _ in range(rounds):
        sim.now += 0.5
        for name in sorted(sim.workers):
            if name in sim.crashed:
                continue
            coordinator = sim.workers[name]
            await _renew(coordinator)
            await _hand_off(coordinator)
            await _pass(coordinator)
            sim.assert_safe()


async def _scenario(shards: int, workers: int, actions: list[tuple[str, float | int]]) -> Sim:
    store = MemoryLeaseStore()
    await store.ensure_table()
    for index in range(shards):
        await store.create_lease(f"shard-{index:03d}", set(), Sentinel.TRIM_HORIZON)
    sim = Sim(store)
    for index in range(workers):
        sim.add_worker(f"w{index}", index)
    for action in actions:
        await _step(sim, action)
        sim.assert_safe()
    return sim


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.integers(1, 8),
    workers=st.integers(1, 4),
    actions=st.lists(ACTIONS, max_size=60),
)
def test_no_two_valid_claims_in_any_interleaving(
    shards: int, workers: int, actions: list[tuple[str, float | int]]
) -> None:
    """Whatever the interleaving, at most one worker may process a lease at a time."""
    asyncio.run(_scenario(shards, workers, actions))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shards=st.integers(1, 8),
    workers=st.integers(1, 4),
    actions=st.lists(ACTIONS, max_size=40),
)
def test_live_workers_converge_to_a_balanced_full_assignment(
    shards: int, workers: int, actions: list[tuple[str, float | int]]
) -> None:
    """After any history, well-behaved live workers end up owning every lease, balanced.

    Crashed workers' leases expire and are taken; hand-offs move leases from the most
    loaded worker until no two live workers differ by more than one lease.
    """

    async def run() -> None:
        sim = await _scenario(shards, workers, actions)
        live = [name for name in sim.workers if name not in sim.crashed]
        if not live:
            sim.add_worker("late", 7)
            live = ["late"]
        await _settle(sim, rounds=int(6 * FAILOVER / 0.5) + 4 * shards)
        held = {name: set(sim.workers[name].held) for name in live}
        owned = set().union(*held.values())
        assert owned == set(sim.store.leases or {}), held
        counts = sorted(len(keys) for keys in held.values())
        assert counts[-1] - counts[0] <= 1, held

    asyncio.run(run())


def test_zombie_after_pause_loses_its_leases_before_processing() -> None:
    """A worker paused past the failover time cannot process once it wakes up."""

    async def run() -> None:
        sim = await _scenario(2, 1, [("pass", 0), ("pass", 0)])
        assert set(sim.workers["w0"].held) == {"shard-000", "shard-001"}
        sim.add_worker("w1", 1)
        # w0 is frozen; w1 keeps scanning while time passes.
        for _ in range(int(FAILOVER / 0.5) + 2):
            sim.now += 0.5
            await _pass(sim.workers["w1"])
            sim.assert_safe()
        assert set(sim.workers["w1"].held) == {"shard-000", "shard-001"}
        # w0 wakes up and tries to process: both leases are reported lost.
        await _process(sim, "w0")
        assert sim.workers["w0"].held == {}

    asyncio.run(run())
