"""``lander demo``: the whole pipeline on the embedded local stack, checked end to end.

1. start kinesalite and moto on loopback; create a 4-shard stream;
2. start three ``lander run`` worker processes landing to a local folder archive;
3. produce events with producer retries, KPL aggregates and a few bad payloads;
4. part way, ``kill -9`` one worker, later split a shard;
5. wait until every produced record is in the archive (read back independently);
6. stop the workers gracefully, compact with Spark, analyse;
7. reconcile: produced = landed + dead letters, compacted = one row per event id,
   duplicates removed by cause = what was made; exit 0 only if everything agrees.

The archive is a local folder (``file://``): the S3 emulator would work for the
workers, but Spark's S3 connector is not a pip package, and the point of the demo is
that it runs anywhere Python, Node and Java do. Everything the demo makes lives under
``--workdir`` (default ``./lander-demo``), which it wipes on start only if an earlier
demo made it. The reconciliation and the summary are in :mod:`.reconcile`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumer.cli.harness import Say, WorkerProcess
from consumer.cli.produce import Produced, Producer, ProduceSpec
from consumer.cli.reconcile import ArchiveView, read_archive, reconcile, shown, summary

MARKER = ".lander-demo"
STREAM = "demo"
TABLE = "demo-leases"


class DemoError(RuntimeError):
    """The demo could not run (setup failed); reconciliation failures are not errors."""


@dataclass(frozen=True, slots=True)
class DemoSpec:
    """How big a demo to run."""

    workdir: Path
    records: int = 20_000
    rate: float = 2_000.0
    shards: int = 4
    workers: int = 3
    retry_share: float = 0.02
    aggregate_share: float = 0.3
    bad_records: int = 6
    failover_seconds: float = 4.0
    flush_seconds: float = 3.0
    catch_up_seconds: float = 180.0
    spark_master: str = "local[2]"
    kill_at: float = 0.35
    split_at: float = 0.6


def prepare_workdir(workdir: Path) -> Path:
    """An empty work folder; refuses to wipe one the demo did not make."""
    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / MARKER).exists():
            raise DemoError(
                f"{workdir} exists and was not made by lander demo; pass another --workdir"
            )
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by lander demo; removed by the next run\n")
    return workdir.resolve()


def run_demo(spec: DemoSpec, say: Say | None = None) -> int:
    """Run the demo; 0 if every count reconciles, 1 if not, 2 if it could not run."""
    say = say or Say()
    try:
        return asyncio.run(_demo(spec, say))
    except DemoError as exc:
        say(f"demo failed: {exc}")
        return 2


async def _demo(spec: DemoSpec, say: Say) -> int:
    from consumer.cli.emulators import LocalStack
    from consumer.cli.emulators.stack import LocalStackError

    workdir = prepare_workdir(spec.workdir)
    archive = workdir / "archive"
    archive.mkdir()
    say(f"work folder {shown(workdir)}")
    say("starting the embedded local stack (kinesalite for Kinesis, moto for DynamoDB)")
    stack = LocalStack()
    try:
        stack.start()
    except LocalStackError as exc:
        raise DemoError(str(exc)) from None
    workers: list[WorkerProcess] = []
    try:
        env = {**os.environ, **stack.env()}
        os.environ.update(stack.env())
        from consumer.aws import Clients

        async with Clients() as clients:
            await clients.kinesis.create_stream(StreamName=STREAM, ShardCount=spec.shards)
            await _wait_active(clients.kinesis)
            say(f"stream {STREAM!r} created with {spec.shards} shards")
            workers = _start_workers(spec, env, archive, workdir)
            say(f"started {len(workers)} workers: " + ", ".join(w.name for w in workers))
            await _wait_ready(workers, say)
            produced, chaos = await _produce_with_chaos(spec, clients, workers, say)
            view = await _catch_up(spec, archive, produced, say)
            await _show_status(clients, spec, say)
        metrics = _scrape(workers)
        for worker in workers:
            if worker.alive():
                code = worker.stop(signal.SIGTERM, timeout=30)
                say(f"{worker.name} stopped gracefully (exit {code})")
                if code != 0:
                    chaos.append(f"{worker.name} exited {code} on SIGTERM")
    finally:
        for worker in workers:
            if worker.alive():
                worker.stop(signal.SIGKILL, timeout=5)
        stack.stop()
    say("local stack stopped")
    return _spark_and_reconcile(spec, workdir, archive, produced, view, chaos, metrics, say)


def _start_workers(
    spec: DemoSpec, env: dict[str, str], archive: Path, workdir: Path
) -> list[WorkerProcess]:
    logs = workdir / "logs"
    logs.mkdir()
    settings = {
        "LANDER_STREAM": STREAM,
        "LANDER_LEASE_TABLE": TABLE,
        "LANDER_ARCHIVE": archive.as_uri(),
        "LANDER_EVENT_ID_POINTER": "/event_id",
        "LANDER_FAILOVER_SECONDS": str(spec.failover_seconds),
        "LANDER_FLUSH_SECONDS": str(spec.flush_seconds),
        "LANDER_SHARD_SYNC_SECONDS": "2",
        "LANDER_POLL_IDLE_SECONDS": "0.25",
        "LANDER_SHUTDOWN_SECONDS": "15",
        "LANDER_METRICS_PORT": "0",
        "LANDER_METRICS_HOST": "127.0.0.1",
        "LANDER_LOG_FORMAT": "json",
    }
    clean = {k: v for k, v in env.items() if not k.startswith("LANDER_")}
    workers = []
    for n in range(1, spec.workers + 1):
        name = f"worker-{n}"
        worker_env = {**clean, **settings, "LANDER_WORKER_ID": f"demo-{name}"}
        workers.append(WorkerProcess(name, worker_env, logs / f"{name}.log"))
    return workers


async def _wait_active(kinesis: Any, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        described = await kinesis.describe_stream_summary(StreamName=STREAM)
        if described["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            return
        await asyncio.sleep(0.1)
    raise DemoError(f"stream {STREAM} did not become ACTIVE in {limit:.0f} s")


async def _wait_ready(workers: list[WorkerProcess], say: Say, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    pending = list(workers)
    while pending and time.monotonic() < deadline:
        for worker in list(pending):
            if not worker.alive():
                raise DemoError(f"{worker.name} exited at start:\n{worker.tail()}")
            status, _ = worker.get("/readyz")
            if status == 200:
                pending.remove(worker)
        await asyncio.sleep(0.2)
    if pending:
        raise DemoError(f"{pending[0].name} not ready after {limit:.0f} s:\n{pending[0].tail()}")
    say("every worker answers /readyz (synced, lease table reachable); /metrics is live")


async def _produce_with_chaos(
    spec: DemoSpec, clients: Any, workers: list[WorkerProcess], say: Say
) -> tuple[Produced, list[str]]:
    produce = ProduceSpec(
        stream=STREAM,
        count=spec.records,
        rate=spec.rate,
        retry_share=spec.retry_share,
        aggregate_share=spec.aggregate_share,
        bad_records=spec.bad_records,
        run_id="demo",
        seed=7,
    )
    say(
        f"producing {spec.records:,} events at {spec.rate:,.0f}/s: {spec.retry_share:.0%} "
        f"producer retries, {spec.aggregate_share:.0%} inside KPL aggregates, "
        f"{spec.bad_records} bad payloads"
    )
    producer = Producer(clients.kinesis, produce, ledger=True)
    task = asyncio.create_task(producer.run())
    chaos: list[str] = []
    victim = workers[1] if len(workers) > 1 else None
    killed = split = False
    last = 0.0
    while not task.done():
        await asyncio.sleep(0.2)
        done = producer.result.events / max(1, spec.records)
        if victim is not None and not killed and done >= spec.kill_at:
            victim.stop(signal.SIGKILL, timeout=5)
            killed = True
            chaos.append(f"{victim.name} killed (SIGKILL) at {done:.0%}")
            say(
                f"kill -9 {victim.name} at {done:.0%}: its leases expire after "
                f"{spec.failover_seconds:g} s and the others take them over"
            )
        if not split and done >= spec.split_at:
            shard = await _split_a_shard(clients.kinesis)
            split = True
            chaos.append(f"{shard} split at {done:.0%}")
            say(f"split {shard} at {done:.0%}: its children are read after it ends")
        if time.monotonic() - last >= 3:
            last = time.monotonic()
            r = producer.result
            say(
                f"produced {r.events:,}/{spec.records:,} events, {r.retries} retries, "
                f"{r.aggregated_user_records:,} in {r.aggregates} aggregates, {r.bad} bad"
            )
    produced = task.result()
    say(
        f"producer done: {produced.user_records:,} user records in "
        f"{produced.kinesis_records:,} Kinesis records, {produced.seconds:.1f} s"
    )
    return produced, chaos


async def _split_a_shard(kinesis: Any) -> str:
    listed = await kinesis.list_shards(StreamName=STREAM)
    shard = next(
        s for s in listed["Shards"] if "EndingSequenceNumber" not in s["SequenceNumberRange"]
    )
    low = int(shard["HashKeyRange"]["StartingHashKey"])
    high = int(shard["HashKeyRange"]["EndingHashKey"])
    await kinesis.split_shard(
        StreamName=STREAM,
        ShardToSplit=shard["ShardId"],
        NewStartingHashKey=str((low + high) // 2),
    )
    await _wait_active(kinesis)
    return str(shard["ShardId"])


async def _catch_up(spec: DemoSpec, archive: Path, produced: Produced, say: Say) -> ArchiveView:
    wanted, bad = produced.places(), produced.places(bad=True)
    deadline = time.monotonic() + spec.catch_up_seconds
    last = 0.0
    while True:
        view = await asyncio.to_thread(read_archive, archive, STREAM)
        landed = len(wanted & set(view.landed))
        dead = len(bad & set(view.dead))
        if landed == len(wanted) and dead == len(bad):
            say(f"archive caught up: {landed:,} records in {view.files} files, {dead} dead letters")
            return view
        if time.monotonic() > deadline:
            say(f"archive did not catch up in {spec.catch_up_seconds:.0f} s")
            return view
        if time.monotonic() - last >= 2:
            last = time.monotonic()
            say(f"waiting for the archive: {landed:,}/{len(wanted):,} records landed")
        await asyncio.sleep(0.5)


async def _show_status(clients: Any, spec: DemoSpec, say: Say) -> None:
    from consumer.cli.status import render_table, shard_rows
    from consumer.leases.model import wall_ms
    from consumer.lifecycle.assembly import lease_table_view

    leases, shards = await lease_table_view(clients, TABLE, STREAM)
    rows = shard_rows(leases, shards, now_ms=wall_ms(), failover_seconds=spec.failover_seconds)
    say("lander status:")
    for line in render_table(rows, STREAM, TABLE).splitlines():
        if line:
            say("  " + line)


def _scrape(workers: list[WorkerProcess]) -> Counter[str]:
    """Sum a few series over the live workers' /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {
        "lander_leases_taken": "leases taken",
        "lander_leases_released": "leases released",
        "lander_records_landed": "records landed",
        "lander_dead_letters": "dead letters",
        "lander_duplicates_dropped": "duplicates dropped",
    }
    totals: Counter[str] = Counter()
    for worker in workers:
        if not worker.alive():
            continue
        status, body = worker.get("/metrics")
        if status != 200:
            continue
        for family in text_string_to_metric_families(body):
            if family.name in wanted:
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        totals[wanted[family.name]] += int(sample.value)
    return totals


def _spark_and_reconcile(  # noqa: PLR0917 - the facts gathered so far
    spec: DemoSpec,
    workdir: Path,
    archive: Path,
    produced: Produced,
    view: ArchiveView,
    chaos: list[str],
    metrics: Counter[str],
    say: Say,
) -> int:
    from sparkjobs.analysis.analyse import AnalyseJob, analyse
    from sparkjobs.catalog import table_ref
    from sparkjobs.compaction.compact import CompactJob, compact
    from sparkjobs.session import C1_BELOW_BYTES, JvmPlan, get_session
    from sparkjobs.table.compacted import read
    from sparkjobs.table.table import open_table
    from sparkjobs.window import Window

    compacted = (workdir / "compacted").as_uri()
    reports = (workdir / "reports").as_uri()
    say(f"starting Spark ({spec.spark_master}) to compact and analyse")
    # The JIT rule `lander compact` follows: C1 only for a small archive (a demo's is),
    # which halves the Spark side's CPU here; no class archive (writing one costs more
    # than one demo's start saves).
    landed = sum(path.stat().st_size for path in archive.rglob("*") if path.is_file())
    jvm = JvmPlan(class_archive=None, c1_only=landed < C1_BELOW_BYTES)
    spark = get_session(spec.spark_master, app="lander-demo", jvm=jvm)
    transport = producer_dups = rows = distinct = 0
    report = ""
    ids: set[str] = set()
    try:
        for day in sorted(view.days):
            window = Window.parse(day)
            manifest = compact(
                spark, CompactJob(archive.as_uri(), STREAM, window, compacted, strict=True)
            )
            transport += manifest.total("transport")
            producer_dups += manifest.total("producer")
            say(
                f"compacted {day}: rows in {manifest.total('input_rows'):,}, out "
                f"{manifest.total('output_rows'):,}; removed transport "
                f"{manifest.total('transport')}, producer {manifest.total('producer')}"
            )
            analysis = analyse(
                spark,
                AnalyseJob(
                    compacted,
                    STREAM,
                    window,
                    reports,
                    archive=archive.as_uri(),
                    event_time_pointer="/event_time",
                    sequence_pointer="/seq",
                ),
            )
            report = f"{reports}/stream={STREAM}/{window.label}/report.html"
            say(f"analysed {day}: {analysis.records:,} records; report written")
            frame = read(spark, table_ref(compacted, STREAM), window)
            day_ids = [str(r["event_id"]) for r in frame.select("event_id").collect()]
            rows += len(day_ids)
            distinct += len(set(day_ids))
            ids.update(day_ids)
    finally:
        spark.stop()
    table = open_table(table_ref(compacted, STREAM), create=False)
    published = (f"lander.{STREAM}", table.metadata_location if table is not None else "")
    lost = len(produced.event_ids() - ids)
    checks = reconcile(produced, view, transport, producer_dups, rows, distinct, lost)
    summary(produced, view, checks, chaos, metrics, report, workdir, lost, published, say)
    return 0 if all(c.ok for c in checks) else 1
