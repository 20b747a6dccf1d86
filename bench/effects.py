"""Effects: what ``consumer.effects`` costs per record, with the store on and off (issue 47).

One in-process worker (``consumer.lifecycle.worker.Worker``, built as ``lander run``
builds it, as the drain's worker side is) reads a pre-filled stream from
TRIM_HORIZON on the embedded stack, on a fresh lease table each time, with one of
three processors that differ only in how they call the same trivial async side effect
per record (it returns a small dict), and checkpoint once per batch:

* **baseline**: reads the record's event id (``/id``, as the effects do) and awaits
  the effect: no store;
* **effects**: the documented processor: ``ShardEffects.record`` in ``Mode.KEYED`` on
  a fresh effects table, one record at a time;
* **redelivery**: the same processor over the effects table the effects side just
  filled, on a fresh lease table: every record a repeat, from a worker that has not
  seen it (no outcome in memory).

The sides alternate within each round, so that drift in the machine hits them alike;
each ratio is a side's median over the baseline's median in the same run. Rates:
records over the time from the worker's start to the last record checkpointed, and
steady (from the first record on: start-up is the same for every side, the steady rate
is the processor's). Every DynamoDB call of the worker's client is counted and billed
by :class:`bench.effects_bill.DynamoBill`, per record from the first record to the
last; the item sizes it needs are read from the tables after each run.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from bench.drain import DrainConfig, fill
from bench.drain_sides import DEFAULT_GC
from bench.effects_bill import DynamoBill, Line, merge, totals
from bench.effects_sides import POINTER, Tally, baseline, through_effects
from bench.local_aws import LOOPBACK, boto3_client, create_stream, local_aws, shard_hash_keys
from bench.report import fmt, median, progress, table
from bench.units import dynamo_item_bytes
from consumer.aws import Clients
from consumer.config import load_settings
from consumer.effects import Effects
from consumer.effects.dynamo import DynamoEffectStore
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.dynamo_table import WORKERS_SUFFIX
from consumer.lifecycle.worker import Worker, tune_gc
from consumer.stream.kinesis import KinesisStream

BASELINE, EFFECTS, REDELIVERY = "baseline", "effects", "redelivery"


@dataclass(frozen=True)
class EffectsConfig:
    """What to measure."""

    records_per_shard: int = 250
    shards: int = 4
    rounds: int = 2
    payload_bytes: int = 200
    redelivery: bool = True
    timeout_seconds: float = 600.0


@dataclass
class Run:
    """One side's worker run."""

    side: str
    round: int
    records: int
    seconds: float
    first_record_seconds: float
    busy_seconds: float
    effect_calls: int
    outcomes: dict[str, int]
    lines: dict[str, Line]
    largest_items: dict[str, int]

    @property
    def rate(self) -> float:
        """Records per second from the worker's start to the last record checkpointed."""
        return self.records / self.seconds

    @property
    def steady_rate(self) -> float:
        """Records per second from the first record to the last."""
        return self.records / max(self.seconds - self.first_record_seconds, 1e-9)

    def as_dict(self) -> dict[str, Any]:
        """For the results file."""
        out = asdict(self)
        out["lines"] = {label: line.as_dict() for label, line in self.lines.items()}
        return {**out, "rate": self.rate, "steady_rate": self.steady_rate}


async def worker_run(
    env: dict[str, str],
    side: str,
    *,
    stream: str,
    expected: int,
    round_: int,
    effects_table: str,
    limit: float,
) -> Run:
    """One in-process worker on a fresh lease table until every record is checkpointed."""
    run_id = uuid.uuid4().hex[:8]
    lease_table = f"bench-effects-{run_id}"
    settings = load_settings(stream=stream, lease_table=lease_table, worker_id=f"w-{run_id}")
    roles = {
        lease_table: "lease",
        lease_table + WORKERS_SUFFIX: "workers",
        effects_table: "effects",
    }
    tally = Tally(expected=expected, bill=DynamoBill(roles))
    async with Clients() as clients:  # exactly as `lander run` makes them
        tally.bill.attach(clients.dynamodb)
        if side == BASELINE:
            factory = baseline(tally)
        else:
            store = DynamoEffectStore(clients.dynamodb, effects_table, lease_table)
            factory = through_effects(tally, Effects(store, event_id_pointer=POINTER))
        worker = Worker(
            settings,
            DynamoLeaseStore(clients.dynamodb, lease_table),
            KinesisStream(clients.kinesis, stream),
            factory,
        )
        tune_gc()  # as `lander run` does; undone below
        tally.began = time.perf_counter()
        running = asyncio.create_task(worker.run())
        counted = asyncio.create_task(tally.done.wait())
        await asyncio.wait([running, counted], timeout=limit, return_when="FIRST_COMPLETED")
        if not counted.done():
            counted.cancel()
            worker.request_stop()
            await asyncio.gather(running, return_exceptions=True)
            raise RuntimeError(f"{side}: {tally.count} of {expected} records handled")
        worker.request_stop()
        await running
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_GC)
    assert tally.first_at is not None
    assert tally.last_at is not None
    largest = largest_items(env, list(roles))
    tally.bill.settle(largest)
    return Run(
        side=side,
        round=round_,
        records=tally.count,
        seconds=tally.last_at - tally.began,
        first_record_seconds=tally.first_at - tally.began,
        busy_seconds=tally.busy_seconds,
        effect_calls=tally.effect_calls,
        outcomes=dict(tally.outcomes),
        lines=tally.bill.phase_lines("records"),
        largest_items=largest,
    )


def largest_items(env: dict[str, str], tables: list[str]) -> dict[str, int]:
    """Each table's largest item in bytes (a Scan outside the bill; tables not there
    left out)."""
    dynamodb = boto3_client(env, "dynamodb")
    existing = set(dynamodb.list_tables()["TableNames"])
    sizes: dict[str, int] = {}
    for name in tables:
        if name not in existing:
            continue
        biggest = 0
        for page in dynamodb.get_paginator("scan").paginate(TableName=name):
            biggest = max([biggest, *(dynamo_item_bytes(item) for item in page["Items"])])
        sizes[name] = biggest
    return sizes


async def measure(
    env: dict[str, str], stream: str, expected: int, config: EffectsConfig
) -> list[Run]:
    """Alternate the sides, ``config.rounds`` times."""
    runs: list[Run] = []
    for round_ in range(1, config.rounds + 1):
        effects_table = f"bench-effects-{uuid.uuid4().hex[:8]}-effects"
        sides = [BASELINE, EFFECTS] + ([REDELIVERY] if config.redelivery else [])
        for side in sides:
            run = await worker_run(
                env,
                side,
                stream=stream,
                expected=expected,
                round_=round_,
                effects_table=effects_table,
                limit=config.timeout_seconds,
            )
            runs.append(run)
            progress(
                f"effects round {round_} {side}: {run.records:,} records in {run.seconds:.2f} s "
                f"= {run.rate:,.0f}/s (steady {run.steady_rate:,.0f}/s)"
            )
    return runs


def run(quick: bool = False) -> dict[str, Any]:
    """Fill a stream, then alternate the sides; print-ready results."""
    from consumer.telemetry import configure_logging

    configure_logging("console", "warning")
    config = EffectsConfig(records_per_shard=50, shards=2, rounds=1) if quick else EffectsConfig()
    with local_aws() as aws:
        kinesis = boto3_client(aws.env, "kinesis")
        if LOOPBACK not in kinesis.meta.endpoint_url:
            raise RuntimeError(f"refusing to fill {kinesis.meta.endpoint_url}: not loopback")
        stream = f"bench-effects-{uuid.uuid4().hex[:8]}"
        create_stream(kinesis, stream, config.shards)
        hash_keys = list(shard_hash_keys(kinesis, stream).values())
        drain = DrainConfig(
            records_per_shard=config.records_per_shard,
            shards=config.shards,
            payload_bytes=config.payload_bytes,
        )
        fill_seconds = asyncio.run(fill(stream, hash_keys, drain))
        total = config.records_per_shard * config.shards
        progress(f"effects: {stream} filled with {total:,} records in {fill_seconds:.1f} s")
        runs = asyncio.run(measure(aws.env, stream, total, config))
    return summarise(runs, config)


def summarise(runs: list[Run], config: EffectsConfig) -> dict[str, Any]:
    """Medians per side with their ratios to the baseline; calls and units per record."""
    sides: dict[str, list[Run]] = {}
    for one in runs:
        sides.setdefault(one.side, []).append(one)
    base = sides[BASELINE]
    base_rate = median([r.rate for r in base])
    base_steady = median([r.steady_rate for r in base])
    summary: dict[str, Any] = {}
    for side, side_runs in sides.items():
        records = sum(r.records for r in side_runs)
        lines = {
            label: line.as_dict() for label, line in merge([r.lines for r in side_runs]).items()
        }
        per_record = {
            label: {
                **line,
                "per_record": line["count"] / records,
                "read_units_per_record": line["read_units"] / records,
                "write_units_per_record": line["write_units"] / records,
            }
            for label, line in lines.items()
        }
        rate = median([r.rate for r in side_runs])
        steady = median([r.steady_rate for r in side_runs])
        summary[side] = {
            "runs": len(side_runs),
            "records": records,
            "median_rate": rate,
            "median_steady_rate": steady,
            "ratio_to_baseline": rate / base_rate,
            "steady_ratio_to_baseline": steady / base_steady,
            "busy_ms_per_record": sum(r.busy_seconds for r in side_runs) / records * 1e3,
            "effect_calls_per_record": sum(r.effect_calls for r in side_runs) / records,
            "outcomes": dict(sum((Counter(r.outcomes) for r in side_runs), Counter())),
            "per_record": {k: v / records for k, v in totals(lines).items()},
            "one_off": totals(lines, "one-off"),
            "coordination": totals(lines, "coordination"),
            "lines": per_record,
        }
    largest: dict[str, int] = {}
    for one in runs:
        for name, size in one.largest_items.items():
            role = (
                "effects"
                if name.endswith("-effects")
                else ("workers" if name.endswith(WORKERS_SUFFIX) else "lease")
            )
            largest[role] = max(largest.get(role, 0), size)
    return {
        "config": asdict(config),
        "runs": [r.as_dict() for r in runs],
        "summary": summary,
        "largest_item_bytes": largest,
    }


def render(result: dict[str, Any]) -> str:
    """The runs, the medians with their ratios, and each side's calls per record."""
    config = result["config"]
    lines = [
        f"effects: one in-process worker, {config['shards']} shards x "
        f"{config['records_per_shard']:,} records (~{config['payload_bytes']} B), "
        f"{config['rounds']} round(s), sides alternating; an effect per record, one at a time",
        "",
        table(
            ["round", "side", "records", "seconds", "records/s", "steady rec/s", "effects run"],
            [
                [
                    r["round"],
                    r["side"],
                    r["records"],
                    r["seconds"],
                    r["rate"],
                    r["steady_rate"],
                    r["effect_calls"],
                ]
                for r in result["runs"]
            ],
        ),
        "",
    ]
    rows = []
    for side, values in result["summary"].items():
        per = values["per_record"]
        rows.append(
            [
                side,
                values["median_rate"],
                f"{values['ratio_to_baseline']:.2g}x",
                values["median_steady_rate"],
                f"{values['steady_ratio_to_baseline']:.2g}x",
                values["busy_ms_per_record"],
                per["requests"],
                per["read_units"],
                per["write_units"],
            ]
        )
    headers = [
        "side (median)",
        "records/s",
        "x baseline",
        "steady rec/s",
        "steady x baseline",
        "ms/rec in processor",
        "requests/rec",
        "RRU/rec",
        "WRU/rec",
    ]
    lines += [table(headers, rows, digits=3), ""]
    for side, values in result["summary"].items():
        rows = [
            [
                label,
                line["kind"],
                line["count"],
                line["per_record"],
                line["read_units_per_record"],
                line["write_units_per_record"],
                line["mean_ms"],
            ]
            for label, line in values["lines"].items()
        ]
        lines.append(f"{side}: DynamoDB calls from the first record to the last")
        lines.append(
            table(
                ["request", "kind", "count", "per record", "RRU/rec", "WRU/rec", "mean ms"],
                rows,
                digits=3,
            )
        )
        lines.append("")
    largest = result["largest_item_bytes"]
    sizes = ", ".join(f"{role} {fmt(n)} B" for role, n in largest.items() if n)
    lines.append(
        f"largest items after the runs: {sizes}. Units by DynamoDB's rules: a strongly "
        "consistent read 1 per 4 KB; a transaction's Put or ConditionCheck 2 per KB, a "
        "plain write 1 per KB (of the larger of the item before and after; a "
        "ConditionCheck, an UpdateItem: its table's largest item). kind: record (grows "
        "with records), coordination (with time), one-off. mean ms: the emulator's, not "
        "DynamoDB's."
    )
    return "\n".join(lines)
