"""Balance by load in the scale simulation: issue 13's hot-shard case.

A board fleet of 4 workers on 20 shards balances by count; then two shards of one
worker get 100x the throughput of the others, as their owners' checkpoints would
report it. The leader sees the loads at its next sweep and moves one hot shard away.
Reported: the simulated time until the hot shards are on different workers with no
hand-off pending, the transfers it took, and the leases each worker ends with.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from bench import virtual_time
from bench.scale import PHASE_LIMIT, Fleet
from bench.virtual_time import VirtualClock
from consumer.config import load_settings
from consumer.leases.model import RESERVED_PREFIX, ShardLoad

HOT = (20, 4)
"""Issue 13's case: 2 hot shards among 20 on 4 workers."""


async def _hot(clock: VirtualClock, seed: int) -> dict[str, Any]:
    """Balance a board fleet by count, then give two shards of one worker 100x the
    throughput of the others (as their checkpoints would report it): how long until
    they are on different workers and no hand-off is pending."""
    shards, workers = HOT
    fleet = Fleet(shards, seed)
    try:
        fleet.start(workers)
        if await fleet.until_balanced(clock, PHASE_LIMIT) is None:
            return {"separated_seconds": None}
        await asyncio.sleep(10.0)
        table = fleet.store.leases or {}
        leases = sorted(k for k in table if not k.startswith(RESERVED_PREFIX))
        victim = table[leases[0]].owner
        hot = [k for k in leases if table[k].owner == victim][:2]
        for key in leases:
            kbps = 1000.0 if key in hot else 10.0
            table[key] = table[key].evolve(load=ShardLoad(kbps * 2, kbps))
        before = fleet.store.bill.copy()
        began = clock.now
        while clock.now - began < PHASE_LIMIT:
            owners = {table[k].owner for k in hot}
            settled = all(table[k].handoff_to is None for k in leases)
            if len(owners) == 2 and settled:
                moved = fleet.store.bill.minus(before).calls.get("UpdateItem transfer", 0)
                counts = Counter(table[k].owner for k in leases)
                return {
                    "separated_seconds": round(clock.now - began, 1),
                    "transfers": moved,
                    "leases_per_worker": sorted(counts.values()),
                    "hot_owner_leases": sorted(counts[o] for o in owners if o),
                }
            await asyncio.sleep(0.1)
        return {"separated_seconds": None}
    finally:
        await fleet.stop()


def hot_shards(seed: int = 1) -> dict[str, Any]:
    """The hot-shard case, in simulated time."""
    clock = VirtualClock()
    state = random.getstate()
    random.seed(seed)
    try:
        result = virtual_time.run(_hot(clock, seed), clock)
    finally:
        random.setstate(state)
    sweep = load_settings(stream="sim", lease_table="sim").lease_sweep_seconds
    return {"shards": HOT[0], "workers": HOT[1], "sweep_seconds": sweep, **result}
