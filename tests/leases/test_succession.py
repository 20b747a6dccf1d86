"""Who reads the leader item how often, and who takes it over when the leader dies.

A leader that dies before it names a deputy left every other worker reading the item
every WATCH_SECONDS (30 s): in a CI run the one other worker of a two-worker fleet took
over 14 s after the kill and more, not at the failover time. While the item names no
deputy, every worker now reads it every second.
"""

from __future__ import annotations

from consumer.leases.board import LEAD_SECONDS, WATCH_SECONDS
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.succession import Succession

FAILOVER = 3.0


def _pair() -> tuple[MemoryLeaseStore, list[float], Succession, Succession]:
    store, now = MemoryLeaseStore(), [100.0]
    leader = Succession(store, "w1", FAILOVER, 2.0, lambda: now[0])
    other = Succession(store, "w2", FAILOVER, 2.0, lambda: now[0])
    return store, now, leader, other


async def _steps(
    now: list[float], succession: Succession, seconds: float, deputy: str | None = None
) -> None:
    """Step every tenth of a second for ``seconds``."""
    for _ in range(round(seconds * 10)):
        now[0] += 0.1
        await succession.step(None, lambda: deputy)


async def test_a_leader_that_dies_before_naming_a_deputy_is_taken_over_at_failover() -> None:
    store, now, leader, other = _pair()
    await store.ensure_table()
    await leader.watch(None)
    assert leader.leads()
    await other.watch(None)
    now[0] += LEAD_SECONDS
    await leader.step(None, lambda: None)  # alive, and no deputy named yet
    await other.watch(None)
    assert other.leader == "w1"
    assert not other.is_deputy()
    # The leader dies here. The other worker keeps reading every second ...
    await _steps(now, other, FAILOVER + 2 * LEAD_SECONDS)
    assert other.leads(), "taken over at the failover time, not WATCH_SECONDS later"


async def test_a_worker_reads_every_second_only_while_no_deputy_is_named() -> None:
    store, now, leader, other = _pair()
    await store.ensure_table()
    await leader.watch(None)
    await other.watch(None)
    reads = 0
    read_leadership = store.read_leadership

    async def counted() -> object:
        nonlocal reads
        reads += 1
        return await read_leadership()

    store.read_leadership = counted  # type: ignore[method-assign,assignment]
    for _ in range(10):  # ten seconds: the leader renews, naming nobody
        now[0] += LEAD_SECONDS
        await leader.step(None, lambda: None)
        await other.step(None, lambda: None)
    assert reads >= 9
    reads = 0
    for _ in range(int(WATCH_SECONDS)):  # the leader names a third worker its deputy
        now[0] += LEAD_SECONDS
        await leader.step(None, lambda: "w3")
        await other.step(None, lambda: None)
    assert reads <= 3
    assert not other.leads()
