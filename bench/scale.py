"""Lease coordination at scale: the real workers on in-memory stores in simulated time.

Thousands of shards and up to a thousand workers cannot run as processes on two cores,
and the lease protocol's costs are counts, not speeds. So this runs the product's own
:class:`~consumer.lifecycle.worker.Worker` objects (default timings, an empty
in-memory stream, a processor that does nothing) in one process, in simulated time
(:mod:`bench.virtual_time`), against one in-memory lease table that bills every call as
DynamoDB would (:class:`bench.billing.BilledLeaseStore`), the workers table included.

Each size runs four phases in one simulation (board coordination, docs/consumer.md;
the scan coordination of earlier releases was measured here too until it was removed):

- **cold start**: every worker starts at once on a table with no lease; the time until
  every shard is owned by a live worker and no worker holds two more than another
  (``balanced``), and the lease creations and takes it took (failed ones apart);
- **steady**: a minute once balanced, billed per shard-minute, with the item written
  most (its write units a second: what one DynamoDB partition must serve);
- **10 % die**: a tenth of the workers freeze, as after ``kill -9`` (their calls never
  return); the time until their shards are owned again and the fleet is balanced;
- **10 % join**: as many new workers start; the time until balanced.

Beside each size, KCL 2.x's and KCL 3.x's defaults computed with the same billing
(:func:`bench.kcl.kcl_costs`). Issues 13 and 44 set the targets: read and write units
per shard-minute at or below KCL 3.x's at every size, the hottest item at most 100
write units a second at 10,000 x 1,000, balance within 3 planning intervals.
"""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import structlog

from bench import virtual_time
from bench.billing import Bill, BilledLeaseStore
from bench.kcl import kcl_costs
from bench.report import progress
from bench.virtual_time import VirtualClock
from consumer.config import Settings, load_settings
from consumer.leases.model import RESERVED_PREFIX
from consumer.leases.store import CoordinatedStore, LeaseStore
from consumer.leases.wake import SEND_TIMEOUT
from consumer.lifecycle.processor import Checkpointer, InitializationInput, ProcessRecordsInput
from consumer.lifecycle.worker import Worker
from consumer.stream.memory import MemoryStream

SIZES_FULL = ((1000, 10), (1000, 100), (1000, 1000), (10000, 10), (10000, 100), (10000, 1000))
SIZES_QUICK = ((100, 10),)
STEADY_SECONDS = 60.0
PHASE_LIMIT = 600.0
"""Simulated seconds a phase may take to balance before it is reported as not balanced."""


class _Freezable:
    """One worker's view of the table: once frozen, no call of it ever returns."""

    def __init__(self, store: LeaseStore) -> None:
        self._store = store
        self.frozen = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.frozen:
                await asyncio.get_running_loop().create_future()  # never done
            result = await method(*args, **kwargs)
            if self.frozen:  # frozen while the call was under way: its answer is lost
                await asyncio.get_running_loop().create_future()
            return result

        return call


# -- the fleet -------------------------------------------------------------------------


class _Idle:
    """A processor that does nothing: the stream is empty, the leases are the point."""

    async def initialize(self, init: InitializationInput) -> None:
        pass

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        pass

    async def lease_lost(self) -> None:
        pass

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        await checkpointer.checkpoint()

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        pass


@dataclass
class _Member:
    worker: Worker
    view: _Freezable
    task: asyncio.Task[None]


class Fleet:
    """Workers sharing one billed table and one in-memory stream."""

    def __init__(self, shards: int, seed: int) -> None:
        self.store = BilledLeaseStore()
        self.stream = MemoryStream(shards)
        self.shards = shards
        self.rng = random.Random(seed)
        self.members: dict[str, _Member] = {}
        self._next = 0
        self._addresses: dict[str, str] = {}

    def settings(self, worker_id: str) -> Settings:
        return load_settings(
            stream="sim",
            lease_table="sim",
            worker_id=worker_id,
            archive="s3://sim/archive",
        )

    def start(self, count: int) -> None:
        """Start ``count`` new workers now."""
        for _ in range(count):
            worker_id = f"worker-{self._next:03d}"
            self._next += 1
            view = _Freezable(self.store)
            worker = Worker(
                self.settings(worker_id),
                cast("CoordinatedStore", view),
                self.stream,
                _Idle,
                rng=random.Random(self.rng.random()),
            )
            # Wake-ups as a deployment with LANDER_METRICS_PORT has them, delivered in
            # the process (no traffic): the address only sizes the board item.
            address = f"10.0.{self._next // 250}.{self._next % 250}:9100"
            self._addresses[address] = worker_id
            worker.advertise(address)
            if worker.board is not None:
                worker.board.courier.waker.transport = self._wake
            task = asyncio.create_task(worker.run(), name=worker_id)
            self.members[worker_id] = _Member(worker, view, task)

    async def _wake(self, address: str) -> bool:
        """A wake-up reaches a live worker; a frozen or stopped one never answers."""
        member = self.members.get(self._addresses.get(address, ""))
        if member is None or member.view.frozen or member.task.done():
            await asyncio.sleep(SEND_TIMEOUT)
            return False
        member.worker.wake()
        return True

    def freeze(self, count: int) -> list[str]:
        """Freeze ``count`` live workers at random, as ``kill -9`` would."""
        live = sorted(self.live())
        chosen = self.rng.sample(live, count)
        for worker_id in chosen:
            self.members[worker_id].view.frozen = True
        return chosen

    def live(self) -> set[str]:
        """Workers not frozen and still running."""
        return {
            worker_id
            for worker_id, member in self.members.items()
            if not member.view.frozen and not member.task.done()
        }

    def balanced(self) -> bool:
        """Every unfinished lease owned by a live worker, and no live worker holding
        two more than another."""
        live = self.live()
        leases = [
            lease
            for key, lease in (self.store.leases or {}).items()
            if not key.startswith(RESERVED_PREFIX) and not lease.finished
        ]
        if len(leases) < self.shards:
            return False
        load = Counter(dict.fromkeys(live, 0))
        for lease in leases:
            if lease.owner not in live:
                return False
            load[lease.owner] += 1
        return max(load.values()) - min(load.values()) <= 1

    async def until_balanced(self, clock: VirtualClock, limit: float) -> float | None:
        """Simulated seconds until :meth:`balanced` (checked every 0.1 s), or None."""
        began = clock.now
        while clock.now - began < limit:
            if self.balanced():
                return round(clock.now - began, 1)
            await asyncio.sleep(0.1)
        return None

    async def stop(self) -> None:
        """Stop the live workers gracefully; abandon the frozen ones."""
        for member in self.members.values():
            if member.view.frozen:
                member.task.cancel()
            else:
                member.worker.request_stop()
        await asyncio.gather(*(m.task for m in self.members.values()), return_exceptions=True)
        failed = [
            (worker_id, m.task.exception())
            for worker_id, m in self.members.items()
            if not m.task.cancelled() and m.task.exception() is not None
        ]
        if failed:
            raise RuntimeError(f"workers failed: {failed[:3]}")


# -- one size --------------------------------------------------------------------------


def _per_shard_minute(bill: Bill, shards: int, seconds: float) -> dict[str, Any]:
    scale = 60.0 / (shards * seconds)
    hottest, units = bill.hottest()
    return {
        "read_units": round(bill.read_units * scale, 3),
        "write_units": round(bill.write_units * scale, 3),
        "hottest_item": hottest,
        "hottest_item_wu_per_second": round(units / seconds, 3),
        "calls": {name: round(n * scale, 3) for name, n in sorted(bill.calls.items())},
    }


def _calls(bill: Bill) -> dict[str, int]:
    return dict(sorted(bill.calls.items()))


async def _phase(
    fleet: Fleet, clock: VirtualClock, workers: int, change: Callable[[int], object]
) -> dict[str, Any]:
    """Change the fleet by ``workers`` (freeze or start them); how long until balanced
    again, and the calls that took."""
    before = fleet.store.bill.copy()
    change(workers)
    return {
        "workers": workers,
        "seconds_to_balance": await fleet.until_balanced(clock, PHASE_LIMIT),
        "calls": _calls(fleet.store.bill.minus(before)),
    }


async def _simulate(shards: int, workers: int, clock: VirtualClock, seed: int) -> dict[str, Any]:
    fleet = Fleet(shards, seed)
    result: dict[str, Any] = {"shards": shards, "workers": workers, "coordination": "board"}
    try:
        fleet.start(workers)
        before = fleet.store.bill.copy()
        cold = await fleet.until_balanced(clock, PHASE_LIMIT)
        result["cold_start"] = {
            "seconds_to_balance": cold,
            "calls": _calls(fleet.store.bill.minus(before)),
        }
        if cold is None:
            return result

        await asyncio.sleep(10.0)  # hand-offs still under way settle
        before = fleet.store.bill.copy()
        await asyncio.sleep(STEADY_SECONDS)
        result["steady"] = _per_shard_minute(fleet.store.bill.minus(before), shards, STEADY_SECONDS)

        tenth = max(1, workers // 10)
        result["die"] = await _phase(fleet, clock, tenth, fleet.freeze)
        result["join"] = await _phase(fleet, clock, tenth, fleet.start)
    finally:
        await fleet.stop()
    return result


def simulate(shards: int, workers: int, seed: int = 1) -> dict[str, Any]:
    """One size, every phase, in simulated time; what it cost and how long it took."""
    clock = VirtualClock()
    began = time.process_time()
    state = random.getstate()
    random.seed(seed)  # the workers' jitter comes from the module's generator
    try:
        result = virtual_time.run(_simulate(shards, workers, clock, seed), clock)
    finally:
        random.setstate(state)
    result["simulated_seconds"] = round(clock.elapsed, 1)
    result["cpu_seconds"] = round(time.process_time() - began, 1)
    return result


# -- the benchmark -----------------------------------------------------------------------


def run_sizes(sizes: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    """Every size, with KCL's figures beside it."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    found = []
    for shards, workers in sizes:
        progress(f"scale: {shards} shards x {workers} workers")
        gc.collect()
        result = simulate(shards, workers)
        result["kcl"] = kcl_costs(shards, workers)
        found.append(result)
    renew = load_settings(stream="sim", lease_table="sim").renew_interval
    from bench.scale_load import HOT, hot_shards

    progress(f"scale: board, hot shards, {HOT[0]} shards x {HOT[1]} workers")
    return {
        "sizes": found,
        "steady_seconds": STEADY_SECONDS,
        "renew_seconds": renew,
        "hot": hot_shards(),
    }


def run(quick: bool = False) -> dict[str, Any]:
    """``python -m bench scale``: the simulation, then (unless quick) its check on the
    emulators with worker processes (:mod:`bench.scale_check`)."""
    result = run_sizes(SIZES_QUICK if quick else SIZES_FULL)
    if not quick:
        from bench.local_aws import local_aws
        from bench.scale_check import run_check

        with local_aws() as aws:
            result["emulators"] = run_check(aws)
    return result


def render(result: dict[str, Any]) -> str:
    """A readable table."""
    lines = [
        f"{'mode':<6}{'shards x workers':<18}{'RU/shard-min':>13}{'KCL2 RU':>9}{'KCL3 RU':>9}"
        f"{'WU/shard-min':>13}{'KCL WU':>8}{'hot WU/s':>9}{'cold s':>8}{'die s':>7}"
        f"{'join s':>8}"
    ]
    for size in result["sizes"]:
        steady = size.get("steady", {})
        kcl = size["kcl"]

        def seconds(phase: str, size: dict[str, Any] = size) -> str:
            value = size.get(phase, {}).get("seconds_to_balance")
            return "-" if value is None else f"{value:.1f}"

        lines.append(
            f"{size.get('coordination', 'scan'):<6}{size['shards']:>5} x {size['workers']:<10}"
            f"{steady.get('read_units', float('nan')):>13.3f}"
            f"{kcl['kcl2']['read_units']:>9.2f}{kcl['kcl3']['read_units']:>9.3f}"
            f"{steady.get('write_units', float('nan')):>13.2f}{kcl['kcl2']['write_units']:>8.2f}"
            f"{steady.get('hottest_item_wu_per_second', float('nan')):>9.2f}"
            f"{seconds('cold_start'):>8}{seconds('die'):>7}{seconds('join'):>8}"
        )
    if result.get("emulators"):
        from bench.scale_check import render_check

        lines.append(render_check(result["emulators"]))
    hot = result.get("hot")
    if hot:
        lines.append(
            f"board, {hot['shards']} shards x {hot['workers']} workers, 2 hot shards (100x the "
            f"KB/s) on one worker: on different workers after {hot['separated_seconds']} s "
            f"(sweep every {hot['sweep_seconds']:g} s), {hot.get('transfers')} transfers, "
            f"leases per worker {hot.get('leases_per_worker')}, hot owners hold "
            f"{hot.get('hot_owner_leases')}"
        )
    for size in result["sizes"]:
        cold = size["cold_start"]["calls"]
        creates = cold.get("PutItem create", 0)
        failed = cold.get("PutItem create (condition failed)", 0)
        takes = cold.get("UpdateItem take", 0)
        lost = cold.get("UpdateItem take (condition failed)", 0)
        lines.append(
            f"{size.get('coordination', 'scan')} {size['shards']} x {size['workers']} cold start: "
            f"lease creations {creates} "
            f"(+{failed} refused), takes {takes} (+{lost} refused); simulated "
            f"{size['simulated_seconds']:.0f} s in {size['cpu_seconds']:.0f} CPU-s"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run("--quick" in sys.argv)))
