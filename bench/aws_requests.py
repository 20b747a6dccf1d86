"""AWS requests per shard-minute: the real lander under a trickle, against KCL's defaults.

Three workers (``consumer.lifecycle.worker.Worker`` with the built-in lander, as ``lander run``
builds them, each with its own clients, lease-table identity and metrics) run in this
process on the embedded stack, on a 4-shard stream that a producer feeds with 5 records
per second per shard, with the product's default timings. Every AWS call the workers
make is counted by service and operation through botocore's event hooks on their
clients: ``provide-client-params`` once per API call (its parameters tell a renewal
from a checkpoint), ``before-send`` once per HTTP request (retries included). The
counts of the steady window (from every shard owned and the leases settled, for
``seconds``) are divided by shard-minutes; start-up and shutdown are counted apart.

The KCL column is computed, not measured: what KCL 2.x would send for the same shards
and workers under its default timings (``LeaseManagementConfig``: failoverTimeMillis
10,000, epsilonMillis 25, shardSyncIntervalMillis 60,000; ``PollingConfig``:
idleTimeBetweenReadsInMillis 1,000, maxRecords 10,000; ``DynamoDBLeaseCoordinator``:
renew every failover / 3 - epsilon, lease taker (one Scan) every 2 x (failover +
epsilon); ``PrefetchRecordsPublisher`` spaces GetRecords calls at least
idleTimeBetweenReads apart). Checkpoints and S3 writes are the application's: a KCL
application landing the same files would checkpoint and put as often as the lander
does, so the measured rate is used for both.

Long module: the measured counts, the computed KCL column and the lander's own model share
one labelling of requests (:func:`classify`), kept beside all three so the columns cannot
drift apart.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from bench.cluster import Producer
from bench.kcl import KclDefaults
from bench.local_aws import boto3_client, create_stream, local_aws, shard_hash_keys
from bench.report import fmt, progress, table
from consumer.leases.board import LEAD_SECONDS, WATCH_SECONDS
from consumer.leases.leader import DEPUTY_SCAN_SECONDS

SHARDS = 4
WORKERS = 3
RATE_PER_SHARD = 5.0


def kcl_per_minute(
    shards: int, workers: int, checkpoints_per_shard_minute: float, kcl: KclDefaults
) -> dict[str, float]:
    """Requests a minute KCL 2.x makes for ``shards`` leased by ``workers``, by request.

    Steady state, every shard owned, records arriving on every shard. The shard sync is
    counted on every worker (one ListShards and one lease-table Scan per interval); KCL
    2.3 and later run it on an elected leader only, so this is an upper bound.
    """
    minute = 60_000
    return {
        "dynamodb UpdateItem (renew)": shards * minute / kcl.renew_ms,
        "dynamodb UpdateItem (checkpoint)": shards * checkpoints_per_shard_minute,
        "dynamodb UpdateItem (take, hand-off, release)": 0.0,
        "dynamodb Scan": workers * (minute / kcl.taker_ms + minute / kcl.shard_sync_ms),
        "kinesis GetRecords": shards * minute / kcl.idle_between_reads_ms,
        "kinesis ListShards": workers * minute / kcl.shard_sync_ms,
        "kinesis GetShardIterator": 0.0,
    }


def lander_model_per_minute(
    shards: int,
    workers: int,
    checkpoints_per_shard_minute: float,
    *,
    renew_seconds: float,
    sweep_seconds: float,
    shard_sync_seconds: float,
    lead_seconds: float = LEAD_SECONDS,
) -> dict[str, float]:
    """What docs/operations.md ("Costs per shard") predicts for the lander, a minute.

    No lease is renewed: the row KCL's renewals fill holds the beats, each worker's on
    its own slot every renew interval. The leader renews the leader item and Scans the
    workers table every ``lead_seconds``; the deputy reads the leader item as often and
    Scans the workers table every :data:`DEPUTY_SCAN_SECONDS`; every other worker reads
    the leader item every :data:`WATCH_SECONDS`. Only the leader sweeps the lease table
    and lists the shards. GetRecords is left out: it depends on the traffic (60 to 300
    per shard-minute).
    """
    deputies = 1 if workers >= 2 else 0
    others = max(0, workers - 2)
    return {
        "dynamodb UpdateItem (renew)": workers * 60 / renew_seconds,
        "dynamodb UpdateItem (checkpoint)": shards * checkpoints_per_shard_minute,
        "dynamodb UpdateItem (take, hand-off, release)": 0.0,
        "dynamodb PutItem": 60 / lead_seconds,
        "dynamodb Scan": 60 / sweep_seconds
        + 60 / lead_seconds
        + deputies * 60 / DEPUTY_SCAN_SECONDS,
        "dynamodb GetItem": deputies * 60 / lead_seconds + others * 60 / WATCH_SECONDS,
        "kinesis ListShards": 60 / shard_sync_seconds,
        "kinesis GetShardIterator": 0.0,
    }


def classify(service: str, operation: str, params: dict[str, Any]) -> str:
    """A request's label: service, operation, and for lease writes which kind."""
    label = f"{service} {operation}"
    if service != "dynamodb" or operation != "UpdateItem":
        return label
    expression = str(params.get("UpdateExpression", ""))
    if "checkpoint = :cp" in expression:
        return f"{label} (checkpoint)"
    if "leaseOwner = :me" in expression or "leaseOwner = :to" in expression:
        return f"{label} (take, hand-off, release)"
    if "REMOVE leaseOwner" in expression or "handoffTo = :to" in expression:
        return f"{label} (take, hand-off, release)"
    return f"{label} (renew)"


@dataclass
class RequestCounter:
    """Counts the API calls and HTTP requests of every client it is attached to."""

    phase: str = "startup"
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(phase, worker, request label) -> API calls."""
    sends: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(phase, "service Operation") -> HTTP requests, retries included."""

    def attach(self, client: Any, worker: str) -> None:
        """Count this client's calls under ``worker``."""
        events = client.meta.events
        events.register("provide-client-params", partial(self._on_call, worker))
        events.register("before-send", self._on_send)

    def _on_call(self, worker: str, **kwargs: Any) -> None:
        model = kwargs["model"]
        label = classify(model.service_model.service_name, model.name, kwargs.get("params", {}))
        self.calls[(self.phase, worker, label)] += 1
        # None: a value returned here would replace the call's parameters.

    def _on_send(self, **kwargs: Any) -> None:
        _, service, operation = str(kwargs["event_name"]).split(".", 2)
        self.sends[(self.phase, f"{service} {operation}")] += 1
        # None: a value returned here would be taken as the HTTP response.

    def by_request(self, phase: str) -> Counter[str]:
        """API calls of one phase by request label, all workers together."""
        out: Counter[str] = Counter()
        for (p, _worker, label), n in self.calls.items():
            if p == phase:
                out[label] += n
        return out

    def by_worker(self, phase: str) -> dict[str, Counter[str]]:
        """API calls of one phase by worker, then request label."""
        out: dict[str, Counter[str]] = {}
        for (p, worker, label), n in self.calls.items():
            if p == phase:
                out.setdefault(worker, Counter())[label] += n
        return out


async def _run_workers(
    stream: str, bucket: str, seconds: float, counter: RequestCounter
) -> dict[str, Any]:
    from consumer.aws import Clients
    from consumer.config import load_settings
    from consumer.leases.dynamo import DynamoLeaseStore
    from consumer.lifecycle.processor import WorkerContext, load_processor
    from consumer.lifecycle.worker import Worker, tune_gc
    from consumer.metrics import LanderMetrics
    from consumer.stream.kinesis import KinesisStream

    table_name = f"{stream}-leases"
    workers: list[Any] = []
    async with AsyncExitStack() as stack:
        for n in range(1, WORKERS + 1):
            name = f"w{n}"
            settings = load_settings(
                stream=stream,
                lease_table=table_name,
                worker_id=name,
                archive=f"s3://{bucket}/landed",
            )
            clients = await stack.enter_async_context(Clients())
            for client in (clients.kinesis, clients.dynamodb, clients.s3):
                counter.attach(client, name)
            context = WorkerContext(settings, clients, LanderMetrics())
            factory = load_processor(settings.processor, context).factory
            workers.append(
                Worker(
                    settings,
                    DynamoLeaseStore(clients.dynamodb, settings.lease_table),
                    KinesisStream(clients.kinesis, stream),
                    factory,
                    metrics=context.metrics,
                )
            )
        tune_gc()
        began = time.monotonic()
        runs = [asyncio.create_task(worker.run()) for worker in workers]
        try:
            settled_after = await _wait_settled(workers, runs)
            progress(
                f"requests: {WORKERS} workers hold every shard after {settled_after:.1f} s; "
                f"counting for {seconds:g} s"
            )
            counter.phase = "steady"
            window_began = time.monotonic()
            await asyncio.sleep(seconds)
            window = time.monotonic() - window_began
            held = {w.worker_id: sorted(w.coordinator.held) for w in workers}
            counter.phase = "shutdown"
        finally:
            for worker in workers:
                worker.request_stop()
            stop_began = time.monotonic()
            outcomes = await asyncio.gather(*runs, return_exceptions=True)
        failures = [repr(o) for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise RuntimeError(f"a worker failed: {failures}")
        settings = workers[0].settings
        return {
            "startup_seconds": window_began - began,
            "window_seconds": window,
            "stop_seconds": time.monotonic() - stop_began,
            "held": held,
            "renew_seconds": settings.renew_interval,
            "sweep_seconds": settings.lease_sweep_seconds,
            "shard_sync_seconds": settings.shard_sync_seconds,
            "flush_seconds": settings.flush_seconds,
            "failover_seconds": settings.failover_seconds,
        }


async def _wait_settled(
    workers: list[Any], runs: list[asyncio.Task[None]], limit_seconds: float = 90.0
) -> float:
    """Until every shard is owned, every worker holds one, and that held for 3 s."""
    began = time.monotonic()
    stable_since: float | None = None
    last: tuple[tuple[str, ...], ...] | None = None
    while time.monotonic() - began < limit_seconds:
        for run in runs:
            if run.done():
                run.result()  # a worker that stopped early: its failure, now
                raise RuntimeError("a worker stopped during start-up")
        held = tuple(tuple(sorted(w.coordinator.held)) for w in workers)
        settled = sum(map(len, held)) == SHARDS and all(held)
        if settled and held == last:
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since >= 3.0:
                return time.monotonic() - began
        else:
            stable_since = None
        last = held
        await asyncio.sleep(0.2)
    raise TimeoutError(f"leases did not settle within {limit_seconds:g} s")


def run(quick: bool = False) -> dict[str, Any]:
    """Count a steady window of three workers on four shards; compare with KCL."""
    from consumer.telemetry import configure_logging

    configure_logging("console", "warning")
    seconds = 30.0 if quick else 120.0
    counter = RequestCounter()
    with local_aws() as aws:
        kinesis = boto3_client(aws.env, "kinesis")
        stream, bucket = f"req-{uuid.uuid4().hex[:8]}", f"req-{uuid.uuid4().hex[:8]}"
        create_stream(kinesis, stream, SHARDS)
        boto3_client(aws.env, "s3").create_bucket(Bucket=bucket)
        producer = Producer(
            boto3_client(aws.env, "kinesis"),
            stream,
            list(shard_hash_keys(kinesis, stream).values()),
            RATE_PER_SHARD * SHARDS,
        )
        producer.start()
        try:
            timing = asyncio.run(_run_workers(stream, bucket, seconds, counter))
        finally:
            producer.stop()
    return summarise(counter, timing, produced=producer.sent, quick=quick)


def summarise(
    counter: RequestCounter, timing: dict[str, Any], *, produced: int, quick: bool
) -> dict[str, Any]:
    """Per shard-minute by request: measured, the docs' model and KCL, with ratios."""
    minutes = timing["window_seconds"] / 60
    shard_minutes = SHARDS * minutes
    steady = counter.by_request("steady")
    puts = steady.get("s3 PutObject", 0)
    objects_per_shard_minute = puts / shard_minutes
    checkpoints = steady.get("dynamodb UpdateItem (checkpoint)", 0) / shard_minutes
    kcl = KclDefaults()
    kcl_minute = kcl_per_minute(SHARDS, WORKERS, checkpoints, kcl)
    kcl_minute["s3 PutObject"] = SHARDS * objects_per_shard_minute
    model = lander_model_per_minute(
        SHARDS,
        WORKERS,
        checkpoints,
        renew_seconds=timing["renew_seconds"],
        sweep_seconds=timing["sweep_seconds"],
        shard_sync_seconds=timing["shard_sync_seconds"],
    )
    model["s3 PutObject"] = SHARDS * objects_per_shard_minute
    labels = sorted(set(steady) | set(kcl_minute) | set(model))
    rows = []
    for label in labels:
        measured = steady.get(label, 0) / shard_minutes
        kcl_value = kcl_minute.get(label)
        model_value = model.get(label)
        rows.append(
            {
                "request": label,
                "service": label.split(" ", 1)[0],
                "count": steady.get(label, 0),
                "per_shard_minute": measured,
                "lander_model_per_shard_minute": None
                if model_value is None
                else model_value / SHARDS,
                "kcl_per_shard_minute": None if kcl_value is None else kcl_value / SHARDS,
                "ratio_to_kcl": _ratio(measured, None if kcl_value is None else kcl_value / SHARDS),
            }
        )
    services: dict[str, dict[str, Any]] = {}
    for service in ("dynamodb", "kinesis", "s3"):
        measured = sum(r["per_shard_minute"] for r in rows if r["service"] == service)
        kcl_total = sum(r["kcl_per_shard_minute"] or 0.0 for r in rows if r["service"] == service)
        services[service] = {
            "per_shard_minute": measured,
            "kcl_per_shard_minute": kcl_total,
            "ratio_to_kcl": _ratio(measured, kcl_total),
        }
    sends = {label: n for (phase, label), n in counter.sends.items() if phase == "steady"}
    return {
        "quick": quick,
        "shards": SHARDS,
        "workers": WORKERS,
        "rate_per_shard": RATE_PER_SHARD,
        "produced": produced,
        "timing": timing,
        "shard_minutes": shard_minutes,
        "objects_per_shard_minute": objects_per_shard_minute,
        "kcl_defaults": {**asdict(kcl), "renew_ms": kcl.renew_ms, "taker_ms": kcl.taker_ms},
        "rows": rows,
        "services": services,
        "scans_per_worker_minute": steady.get("dynamodb Scan", 0) / (WORKERS * minutes),
        "http_requests_steady": sum(sends.values()),
        "api_calls_steady": sum(steady.values()),
        "steady_by_worker": {
            worker: dict(counts) for worker, counts in counter.by_worker("steady").items()
        },
        "startup": dict(counter.by_request("startup")),
        "shutdown": dict(counter.by_request("shutdown")),
    }


def _ratio(value: float, baseline: float | None) -> float | None:
    if baseline is None or baseline == 0:
        return None
    return value / baseline


def _lease_timing(timing: dict[str, Any]) -> str:
    """A result's lease timings; those of earlier releases named their lease scan."""
    if "scan_seconds" in timing:
        return f"renew {timing['renew_seconds']:.2f} s, lease scan {timing['scan_seconds']:.2f} s"
    return f"beat {timing['renew_seconds']:.2f} s, lease sweep {timing['sweep_seconds']:g} s"


def render(result: dict[str, Any]) -> str:
    """The per-request table, the per-service totals, start-up and shutdown."""
    timing = result["timing"]
    lines = [
        f"requests: {result['workers']} workers (in-process, product defaults) on "
        f"{result['shards']} shards, {result['rate_per_shard']:g} records/s per shard; "
        f"steady window {timing['window_seconds']:.0f} s = "
        f"{result['shard_minutes']:.1f} shard-minutes (start-up {timing['startup_seconds']:.1f} "
        f"s, stop {timing['stop_seconds']:.1f} s)",
        f"lander timings: {_lease_timing(timing)}, shard sync "
        f"{timing['shard_sync_seconds']:g} s, flush "
        f"{timing['flush_seconds']:g} s; landed {result['objects_per_shard_minute']:.2f} objects "
        f"per shard-minute",
        "",
    ]
    rows = [
        [
            row["request"],
            row["count"],
            row["per_shard_minute"],
            row["lander_model_per_shard_minute"],
            row["kcl_per_shard_minute"],
            _x(row["ratio_to_kcl"]),
        ]
        for row in result["rows"]
    ]
    lines.append(
        table(
            ["request", "count", "per shard-min", "docs model", "KCL 2.x defaults", "x KCL"],
            rows,
        )
    )
    lines.append("")
    rows = [
        [
            service,
            values["per_shard_minute"],
            values["kcl_per_shard_minute"],
            _x(values["ratio_to_kcl"]),
        ]
        for service, values in result["services"].items()
    ]
    lines.append(table(["service", "per shard-min", "KCL 2.x defaults", "x KCL"], rows))
    lines.append(
        f"Scans per worker-minute: {result['scans_per_worker_minute']:.1f}; HTTP requests "
        f"{result['http_requests_steady']:,} for {result['api_calls_steady']:,} API calls "
        "(retries are the difference)"
    )
    by_worker = ", ".join(
        f"{worker} holds {len(shards)}" for worker, shards in timing["held"].items()
    )
    lines.append(f"leases: {by_worker}")
    for phase in ("startup", "shutdown"):
        counts = ", ".join(f"{k} {v}" for k, v in sorted(result[phase].items()))
        lines.append(f"{phase} (all workers): {counts}")
    return "\n".join(lines)


def _x(ratio: float | None) -> str:
    if ratio is None or math.isnan(ratio):
        return "-"
    return f"{fmt(ratio)}x"
