"""The scale simulation's parts: simulated time, DynamoDB billing, and a small fleet.

bench/scale.py runs the real workers on in-memory stores in simulated time to count
what the lease protocol costs at 1,000 shards; these check that its clock, its bill and
its phases measure what they say, at a size that runs in a second.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from bench import virtual_time
from bench.billing import BilledLeaseStore, item_bytes
from bench.kcl import kcl_costs
from bench.scale import simulate
from bench.scale_load import hot_shards
from bench.units import READ_UNIT
from bench.virtual_time import VirtualClock
from consumer.leases.model import Lease, LeaseLostError, ShardReport
from consumer.sequence import Sentinel


def test_an_hour_of_simulated_sleep_takes_no_real_time_and_the_clock_is_given_back() -> None:
    clock = VirtualClock()
    real = time.monotonic

    async def main() -> float:
        began = time.monotonic()
        await asyncio.gather(asyncio.sleep(3600), asyncio.sleep(10))
        return time.monotonic() - began

    started = time.perf_counter()
    assert virtual_time.run(main(), clock) == pytest.approx(3600, abs=0.01)
    assert time.perf_counter() - started < 1.0
    assert clock.elapsed == pytest.approx(3600, abs=0.01)
    assert time.monotonic is real


def test_a_lease_item_is_billed_by_its_attributes_as_dynamodb_counts_them() -> None:
    bare = Lease("shardId-000000000007", checkpoint=Sentinel.TRIM_HORIZON)
    # Names count as bytes; a number about a byte per two digits plus one (0: 2 bytes).
    # leaseKey, leaseCounter 0, checkpoint TRIM_HORIZON, checkpointSubSequenceNumber 0,
    # ownerSwitchesSinceCheckpoint 0:
    expected = (8 + 20) + (12 + 2) + (10 + 12) + (27 + 2) + (28 + 2)
    assert item_bytes(bare) == expected
    owned = bare.evolve(owner="worker-001", counter=123_456, updated_ms=1_790_000_000_000)
    # counter 6 digits: 4 bytes; leaseOwner; lastUpdateMs 13 digits: 8 bytes
    assert item_bytes(owned) == expected + 2 + (10 + 10) + (12 + 8)
    reported = owned.evolve(lag_ms=0, report=ShardReport(pending=3, last_error="boom"))
    assert item_bytes(reported) > item_bytes(owned) + len("lastError") + 4


async def test_scans_reads_and_writes_are_billed_in_dynamodb_units() -> None:
    store = BilledLeaseStore()
    await store.ensure_table()
    for n in range(200):
        await store.create_lease(f"shardId-{n:012d}", frozenset(), Sentinel.TRIM_HORIZON)
    assert store.bill.calls["PutItem create"] == 200
    assert store.bill.write_units == 200
    total = sum(item_bytes(lease) for lease in (store.leases or {}).values())

    leases = await store.list_leases()
    assert store.bill.read_units == math.ceil(total / READ_UNIT)
    assert store.bill.calls["Scan (strong)"] == 1

    taken = await store.take(leases[0], "worker-001")
    with pytest.raises(LeaseLostError):
        await store.take(leases[0], "worker-002")  # as observed before the first take
    assert store.bill.calls["UpdateItem take"] == 1
    assert store.bill.calls["UpdateItem take (condition failed)"] == 1
    # A refused write is billed too; the owner changed, so the owner index was written.
    assert store.bill.calls["owner index write"] == 1
    assert store.bill.write_units == 203

    await store.renew(taken)
    assert store.bill.calls["UpdateItem renew"] == 1
    assert store.bill.calls["owner index write"] == 1  # same owner: no index write
    await store.release(store.leases[taken.key] if store.leases else taken)
    assert store.bill.calls["owner index write"] == 2  # the entry is deleted

    await store.join("worker-001")
    before = store.bill.write_units
    slot = await store.beat("worker-001", 0, held=1, leaving=False, read=0)
    assert slot.counter == 1
    assert store.bill.write_units == before + 1  # a small item: one unit, no read
    assert store.bill.calls["UpdateItem slot beat"] == 1
    reads = store.bill.read_units
    await store.read_board()
    assert store.bill.read_units == reads + 0.5  # the workers table: one eventual unit
    assert not await store.create_lease(leases[1].key, frozenset(), Sentinel.TRIM_HORIZON)
    assert store.bill.calls["PutItem create (condition failed)"] == 1


def test_kcl_defaults_give_the_issues_reference_figures() -> None:
    """1,000 shards x 100 workers, 300-byte items: KCL 2.x about 185 read units/s (each
    worker's eventually consistent Scan every ~20 s), KCL 3.x about 7 (a leader's Scan
    every 20 s, each worker's GSI Query every 10 s)."""
    costs = kcl_costs(1000, 100)
    per_second = 1000 / 60
    assert costs["kcl2"]["read_units"] * per_second == pytest.approx(37 * 100 / 20.05, rel=1e-3)
    assert costs["kcl3"]["read_units"] * per_second == pytest.approx(37 / 20 + 5, rel=1e-3)
    renewals = 1000 / (10 / 3 - 0.025)
    assert costs["kcl2"]["write_units"] * per_second == pytest.approx(renewals, rel=1e-3)


def test_a_small_fleet_reads_only_the_sweep_and_takes_over_within_the_bound() -> None:
    """20 shards, 4 workers, default timings (failover 10 s, renew 3.3 s): one leader
    creates every lease, a frozen worker's shards are owned again within failover +
    renew (+1 s), new workers are absorbed, and the steady read cost is the leader's
    sweep alone (no strong Scan, no per-lease renewal)."""
    result = simulate(20, 4)
    cold = result["cold_start"]
    assert cold["seconds_to_balance"] is not None
    # The leases only: each worker's board slot is its claim on its worker id.
    assert cold["calls"]["PutItem create"] == 20
    assert "PutItem create (condition failed)" not in cold["calls"]
    assert result["die"]["seconds_to_balance"] <= 10 + 10 / 3 + 1
    assert result["die"]["calls"]["UpdateItem slot fence"] == 1
    assert result["join"]["seconds_to_balance"] is not None
    steady = result["steady"]["calls"]
    assert "Scan (strong)" not in steady
    assert "UpdateItem renew" not in steady
    assert steady["Scan (eventual)"] * 20 <= 2  # the sweep, once a minute
    # Every worker beats its own item every renew interval; the leader renews the
    # leader item every second; the deputy reads the leader item every second, the
    # other two every WATCH_SECONDS.
    assert steady["UpdateItem slot beat"] * 20 == pytest.approx(4 * 60 / (10 / 3), rel=0.05)
    assert steady["PutItem leader renew"] * 20 == pytest.approx(60, rel=0.05)
    # The leader Scans the workers table every second, the deputy every 2 s.
    assert steady["Scan workers (eventual)"] * 20 == pytest.approx(60 + 30, rel=0.05)
    assert steady["GetItem leader (eventual)"] * 20 == pytest.approx(60 + 2 * 60 / 30, rel=0.1)
    # No item is written more than about once a second: the leader item.
    assert result["steady"]["hottest_item_wu_per_second"] == pytest.approx(1.0, rel=0.05)


def test_two_hot_shards_end_on_different_workers_by_the_next_sweep() -> None:
    """Issue 13's case in the simulation: the leader sees the loads at its next sweep
    and moves one hot shard; the fleet then rests (no hand-off pending)."""
    result = hot_shards()
    assert result["separated_seconds"] is not None
    assert result["separated_seconds"] <= result["sweep_seconds"] + 15
    assert len(result["hot_owner_leases"]) == 2
    # Balanced by load, not by count: the hot shards' owners hold fewer leases.
    assert max(result["hot_owner_leases"]) < max(result["leases_per_worker"])
