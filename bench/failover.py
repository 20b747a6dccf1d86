"""Failover: kill -9 and SIGTERM between two worker processes, round after round.

A 4-shard stream with a light producer (50 records/s spread over every shard) and two
``lander run`` processes with the product's timings. Each round waits until the two
workers hold two leases each, then:

* **kill -9** one worker and measure, from the kill, (a) when the lease table shows
  every one of its shards owned by the survivor (boto3 scans every 0.1 s) and (b) when
  the survivor has delivered a batch of every one of them (the recording processor's
  timestamps). Target: (b) <= failover + renew interval (10 + 3.33 s by default).
* **SIGTERM** one worker (graceful hand-off) and measure the same two times and when
  the process exited. It should be far below the failover time, since the leaving
  worker releases its leases instead of letting them expire.

After each round a fresh worker (a new name) is started and the next round waits for
the balance to settle again; that settling time is reported too.
"""

from __future__ import annotations

import shutil
import signal
import time
import uuid
from dataclasses import asdict, dataclass
from functools import partial
from itertools import count
from typing import Any

from bench.cluster import LeaseTable, Producer, Recordings, Workers
from bench.local_aws import LocalAws, boto3_client, create_stream, shard_hash_keys
from bench.report import RESULTS, fmt, median, progress, table
from consumer.cli.harness import wait_until


@dataclass(frozen=True)
class FailoverConfig:
    """What to measure."""

    failover_seconds: tuple[float, ...] = (10.0, 3.0)
    kills: int = 5
    graceful: int = 5
    shards: int = 4
    rate: float = 50.0
    poll_seconds: float = 0.1
    settle_seconds: float = 1.0
    """Pause once balanced, so that both workers are delivering before the signal."""


@dataclass
class Round:
    """One kill or SIGTERM and what followed."""

    kind: str
    round: int
    victim: str
    survivor: str
    shards: list[str]
    rebalance_seconds: float
    """From starting the previous round's replacement to both workers holding two."""
    owner_seconds: float
    """Signal to the table showing every victim shard owned by the survivor."""
    deliver_seconds: float
    """Signal to the survivor's first delivered batch, on the slowest victim shard."""
    per_shard_deliver_seconds: dict[str, float]
    exit_seconds: float | None = None
    exit_code: int | None = None
    gap_seconds: float | None = None
    """SIGTERM: the longest, over the victim's shards, from the victim's last delivered
    record to the survivor's first (how long the shard was not read)."""
    redelivered: int | None = None
    """SIGTERM: records of the victim's shards that both the victim and, after the
    signal, the survivor delivered (a graceful hand-off redelivers none)."""


def _balanced(table: LeaseTable, live: tuple[str, ...], each: int) -> bool:
    load = table.load()
    return sum(load.values()) == each * len(live) and all(load[name] == each for name in live)


def _owned_by(table: LeaseTable, shards: list[str], owner: str) -> bool:
    owners = table.owners()
    return all(owners.get(shard) == owner for shard in shards)


def _watch(
    workers: Workers,
    table: LeaseTable,
    recordings: Recordings,
    *,
    victim: str,
    survivor: str,
    shards: list[str],
    signalled: float,
    timeout: float,
    poll: float,
) -> tuple[float, dict[str, float], float | None]:
    """Poll until the survivor owns and delivers every victim shard; times from signal."""
    owner_at: float | None = None
    exit_at: float | None = None
    delivered: dict[str, float] = {}
    deadline = signalled + timeout
    while True:
        if exit_at is None and workers.exit_code(victim) is not None:
            exit_at = time.time()
        if owner_at is None and _owned_by(table, shards, survivor):
            owner_at = time.time()
        recordings.poll()
        for shard in shards:
            if shard not in delivered:
                first = recordings.first_batch(survivor, shard, signalled)
                if first is not None:
                    delivered[shard] = first - signalled
        if owner_at is not None and len(delivered) == len(shards):
            break
        if time.time() > deadline:
            raise TimeoutError(
                f"{survivor} did not take over {shards} from {victim} within {timeout:g} s "
                f"(owners {table.owners()}, delivered {delivered}):\n"
                f"{workers.log_tail(survivor)}"
            )
        time.sleep(poll)
    if exit_at is None:
        wait_until(lambda: workers.exit_code(victim) is not None, 60, f"{victim} to exit")
        exit_at = time.time()
    return owner_at - signalled, delivered, exit_at - signalled


def emulator_call_ms(dynamodb: Any, calls: int = 30) -> float:
    """Median round trip of a DynamoDB call to the idle emulator, in ms. Every step of a
    hand-off is such a call on the serialised moto, so the hand-off times scale with it:
    compare runs on different machines (or days) only together with this figure."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        dynamodb.list_tables(Limit=1)
        times.append((time.perf_counter() - started) * 1000)
    return median(times)


def measure_setting(aws: LocalAws, failover: float, config: FailoverConfig) -> dict[str, Any]:
    """Kill and SIGTERM rounds on a fresh stream and table, at one failover setting."""
    renew = failover / 3
    kinesis = boto3_client(aws.env, "kinesis")
    suffix = uuid.uuid4().hex[:8]
    stream, lease_table = f"bench-failover-{suffix}", f"bench-failover-leases-{suffix}"
    create_stream(kinesis, stream, config.shards)
    hash_keys = shard_hash_keys(kinesis, stream)
    workdir = RESULTS / "failover-work" / f"failover-{failover:g}s"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    workers = Workers(
        workdir,
        stream,
        lease_table,
        # A metrics port, as every deploy file sets one: board workers wake each other there.
        {
            "LANDER_FAILOVER_SECONDS": f"{failover:g}",
            "LANDER_METRICS_PORT": "0",
        },
    )
    table = LeaseTable(boto3_client(aws.env, "dynamodb"), lease_table)
    call_ms = emulator_call_ms(table.dynamodb)
    recordings = Recordings(workers.recordings)
    producer = Producer(
        boto3_client(aws.env, "kinesis"), stream, list(hash_keys.values()), config.rate
    )
    names = (f"w{n}" for n in count(1))
    live = [next(names), next(names)]
    half = config.shards // 2
    rounds: list[Round] = []
    producer.start()
    try:
        started = time.time()
        for name in live:
            workers.start(name)
        plan = [("kill", i) for i in range(config.kills)] + [
            ("sigterm", i) for i in range(config.graceful)
        ]
        for position, (kind, index) in enumerate(plan):
            wait_until(
                partial(_balanced, table, tuple(live), half),
                60 + 3 * failover,
                f"{live} to hold {half} leases each",
                step=0.2,
            )
            rebalance = time.time() - started
            time.sleep(config.settle_seconds)
            victim = live[index % 2]
            survivor = live[1 - index % 2]
            shards = sorted(k for k, owner in table.owners().items() if owner == victim)
            signalled = time.time()
            workers.signal(victim, signal.SIGKILL if kind == "kill" else signal.SIGTERM)
            owner_s, delivered, exit_s = _watch(
                workers,
                table,
                recordings,
                victim=victim,
                survivor=survivor,
                shards=shards,
                signalled=signalled,
                timeout=3 * failover + 30,
                poll=config.poll_seconds,
            )
            gaps = []
            again = 0
            for shard in shards:
                again += len(
                    recordings.delivered(victim, shard)
                    & recordings.delivered(survivor, shard, signalled)
                )
                last = recordings.last_batch(victim, shard)
                first = recordings.first_batch(survivor, shard, signalled)
                if last is not None and first is not None:
                    gaps.append(first - last)
            rounds.append(
                Round(
                    kind=kind,
                    gap_seconds=max(gaps) if gaps and kind == "sigterm" else None,
                    redelivered=again if kind == "sigterm" else None,
                    round=index + 1,
                    victim=victim,
                    survivor=survivor,
                    shards=shards,
                    rebalance_seconds=rebalance,
                    owner_seconds=owner_s,
                    deliver_seconds=max(delivered.values()),
                    per_shard_deliver_seconds=delivered,
                    exit_seconds=exit_s if kind == "sigterm" else None,
                    exit_code=workers.exit_code(victim),
                )
            )
            progress(
                f"failover {failover:g}s {kind} {index + 1}: {victim} -> {survivor}: owned after "
                f"{owner_s:.2f} s, delivering after {max(delivered.values()):.2f} s"
            )
            if position == len(plan) - 1:
                break
            replacement = next(names)
            workers.start(replacement)
            started = time.time()
            live = [survivor, replacement]
    finally:
        producer.stop()
        codes = workers.stop_all()
    target = failover + renew
    kills = [r for r in rounds if r.kind == "kill"]
    terms = [r for r in rounds if r.kind == "sigterm"]
    return {
        "coordination": "board",
        "emulator_call_ms": call_ms,
        "failover_seconds": failover,
        "renew_seconds": renew,
        "target_seconds": target,
        "stream": stream,
        "lease_table": lease_table,
        "produced": producer.sent,
        "producer_failures": producer.failures,
        "final_exit_codes": codes,
        "rounds": [asdict(r) for r in rounds],
        "summary": {
            "kill": _summary(kills, target),
            "sigterm": _summary(terms, failover),
        },
    }


def _summary(rounds: list[Round], bound: float) -> dict[str, Any]:
    deliver = [r.deliver_seconds for r in rounds]
    owner = [r.owner_seconds for r in rounds]
    return {
        "rounds": len(rounds),
        "bound_seconds": bound,
        "median_deliver_seconds": median(deliver),
        "max_deliver_seconds": max(deliver, default=float("nan")),
        "median_owner_seconds": median(owner),
        "max_owner_seconds": max(owner, default=float("nan")),
        "median_rebalance_seconds": median([r.rebalance_seconds for r in rounds]),
        "median_gap_seconds": median([r.gap_seconds for r in rounds if r.gap_seconds is not None]),
        "redelivered": sum(r.redelivered or 0 for r in rounds),
        "max_gap_seconds": max(
            (r.gap_seconds for r in rounds if r.gap_seconds is not None), default=float("nan")
        ),
        "bound_met": bool(deliver) and max(deliver) <= bound,
        "max_over_bound": max(deliver, default=float("nan")) / bound,
    }


def run_failover(aws: LocalAws, config: FailoverConfig) -> dict[str, Any]:
    """Every failover setting in turn; print and return the results."""
    settings = []
    for failover in config.failover_seconds:
        progress(
            f"failover {failover:g}s: {config.kills} kill -9 rounds, "
            f"{config.graceful} SIGTERM rounds"
        )
        settings.append(measure_setting(aws, failover, config))
    result = {"benchmark": "failover", "config": asdict(config), "settings": settings}
    print_failover(result)
    return result


def print_failover(result: dict[str, Any]) -> None:
    """The failover tables, on stdout."""
    print(f"\n{render_failover(result)}", flush=True)


def render_failover(result: dict[str, Any]) -> str:
    """The failover tables: every round, then medians and maxima against the bounds."""
    config = result["config"]
    out: list[str] = []
    for setting in result["settings"]:
        failover, renew = setting["failover_seconds"], setting["renew_seconds"]
        call = setting.get("emulator_call_ms")
        emulator = "" if call is None else f"idle emulator call {call:.1f} ms, "
        out.append(
            f"== failover: LANDER_COORDINATION={setting.get('coordination', 'scan')}, "
            f"LANDER_FAILOVER_SECONDS={failover:g} (renew {renew:.2f} s), {emulator}"
            f"{config['shards']} shards, 2 worker processes, {config['rate']:g} records/s =="
        )
        rows = [
            [
                r["kind"],
                r["round"],
                f"{r['victim']}->{r['survivor']}",
                r["rebalance_seconds"],
                r["owner_seconds"],
                r["deliver_seconds"],
                r["exit_seconds"],
                r.get("gap_seconds"),
                r.get("redelivered"),
            ]
            for r in setting["rounds"]
        ]
        out.append(
            table(
                [
                    "signal",
                    "round",
                    "from->to",
                    "balanced after s",
                    "owner changed s",
                    "delivering s",
                    "exited s",
                    "unread gap s",
                    "redelivered",
                ],
                rows,
            )
        )
        out.append("")
        rows = []
        for kind, label in (("kill", "kill -9"), ("sigterm", "SIGTERM")):
            s = setting["summary"][kind]
            if not s["rounds"]:
                continue
            bound = (
                f"failover+renew {s['bound_seconds']:.2f}"
                if kind == "kill"
                else f"failover {s['bound_seconds']:.2f}"
            )
            rows.append(
                [
                    label,
                    s["rounds"],
                    s["median_owner_seconds"],
                    s["max_owner_seconds"],
                    s["median_deliver_seconds"],
                    s["max_deliver_seconds"],
                    bound,
                    fmt(s["bound_met"]),
                ]
            )
        out.append(
            table(
                [
                    "signal",
                    "rounds",
                    "owner med s",
                    "owner max s",
                    "deliver med s",
                    "deliver max s",
                    "bound s",
                    "max <= bound",
                ],
                rows,
            )
        )
        out.append("")
    out.append(
        "owner changed: the table (boto3 scan every 0.1 s) shows the survivor owning every "
        "shard of the victim; delivering: the survivor's first batch of the slowest of them. "
        "Times from the signal. unread gap (SIGTERM): the longest time, over the victim's "
        "shards, from its last delivered record to the survivor's first. redelivered "
        "(SIGTERM): records of the victim's shards the survivor delivered again."
    )
    return "\n".join(out)
