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
demo made it.

Long module: one end-to-end scenario, read in order, whose steps hand each other the facts
gathered so far (workers, produced counts, archive, compacted rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from consumer.archive import reader as archive_reader
from consumer.cli.harness import WorkerProcess
from consumer.cli.produce import Place, Produced, Producer, ProduceSpec

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


@dataclass(slots=True)
class ArchiveView:
    """What an independent reader finds in the archive folder."""

    landed: Counter[Place] = field(default_factory=Counter)
    dead: Counter[Place] = field(default_factory=Counter)
    files: int = 0
    dead_files: int = 0
    days: set[str] = field(default_factory=set)

    @property
    def raw_duplicates(self) -> int:
        """Copies beyond the first of any position (the target is zero)."""
        return sum(n - 1 for n in self.landed.values() if n > 1)


def read_archive(root: Path, stream: str) -> ArchiveView:
    """Read every landed and dead-letter object under a file archive (whole files only)."""
    view = ArchiveView()
    for landed in archive_reader.read_archive(root, stream):
        view.files += 1
        view.days.add(f"{landed.key.minute:%Y-%m-%d}")
        for line in landed.lines:
            view.landed[(line.shard_id, line.sequence_number, line.subsequence_number)] += 1
    for path in archive_reader.dead_letter_paths(root, stream):
        view.dead_files += 1
        for letter in archive_reader.read_dead_letters(path):
            view.dead[_position(letter)] += 1
    return view


def _position(line: dict[str, Any]) -> Place:
    return (str(line["shard_id"]), str(line["sequence_number"]), int(line["subsequence_number"]))


@dataclass(slots=True)
class Check:
    """One line of the final reconciliation."""

    what: str
    ok: bool
    detail: str


class Say:
    """Progress lines on stdout, each with the seconds since the demo started."""

    def __init__(self, out: IO[str] = sys.stdout) -> None:
        self.out = out
        self.started = time.monotonic()

    def __call__(self, text: str) -> None:
        """Print one progress line."""
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {text}\n")
        self.out.flush()


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
    say(f"work folder {_shown(workdir)}")
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
    from consumer.leases.dynamo import DynamoLeaseStore
    from consumer.leases.model import wall_ms
    from consumer.stream.kinesis import KinesisStream

    leases = await DynamoLeaseStore(clients.dynamodb, TABLE).list_leases()
    shards = await KinesisStream(clients.kinesis, STREAM).list_shards()
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
    from sparkjobs.analyse import AnalyseJob, analyse
    from sparkjobs.compact import CompactJob, compact
    from sparkjobs.compacted import read
    from sparkjobs.io import filesystem_for
    from sparkjobs.session import get_session
    from sparkjobs.window import Window

    compacted = (workdir / "compacted").as_uri()
    reports = (workdir / "reports").as_uri()
    say(f"starting Spark ({spec.spark_master}) to compact and analyse")
    spark = get_session(spec.spark_master, app="lander-demo")
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
            frame = read(spark, filesystem_for(compacted, spark), compacted, STREAM, window)
            day_ids = [str(r["event_id"]) for r in frame.select("event_id").collect()]
            rows += len(day_ids)
            distinct += len(set(day_ids))
            ids.update(day_ids)
    finally:
        spark.stop()
    lost = len(produced.event_ids() - ids)
    checks = _reconcile(produced, view, transport, producer_dups, rows, distinct, lost)
    _summary(produced, view, checks, chaos, metrics, report, workdir, lost, say)
    return 0 if all(c.ok for c in checks) else 1


def _reconcile(  # noqa: PLR0917 - one number per argument
    produced: Produced,
    view: ArchiveView,
    transport: int,
    producer_dups: int,
    rows: int,
    distinct: int,
    lost: int,
) -> list[Check]:
    wanted, bad = produced.places(), produced.places(bad=True)
    landed = set(view.landed)
    missing = len(wanted - landed)
    unexpected = len(landed - wanted)
    events = len(produced.event_ids())
    return [
        Check(
            "every produced record landed",
            missing == 0 and unexpected == 0,
            f"{len(wanted):,} produced, {len(landed & wanted):,} landed, "
            f"{missing} missing, {unexpected} unexpected",
        ),
        Check(
            "bad payloads dead-lettered",
            bad == set(view.dead),
            f"{len(bad)} bad, {len(view.dead)} dead letters",
        ),
        Check(
            "raw copies removed as transport duplicates",
            transport == view.raw_duplicates,
            f"{view.raw_duplicates} raw copies in the archive, {transport} removed",
        ),
        Check(
            "producer retries removed",
            producer_dups == produced.retries,
            f"{produced.retries} retries, {producer_dups} removed",
        ),
        Check(
            "one row per event id",
            rows == distinct == events and lost == 0,
            f"{events:,} events, {rows:,} rows, {distinct:,} distinct ids, {lost} lost",
        ),
    ]


def _summary(  # noqa: PLR0917
    produced: Produced,
    view: ArchiveView,
    checks: list[Check],
    chaos: list[str],
    metrics: Counter[str],
    report: str,
    workdir: Path,
    lost: int,
    say: Say,
) -> None:
    ok = all(c.ok for c in checks)
    out = say.out
    out.write("\n")
    out.write(f"kinesis-lander demo: {'OK, every count reconciles' if ok else 'FAILED'}\n")
    lines = [
        (
            "produced",
            f"{produced.events:,} events + {produced.retries:,} producer retries + "
            f"{produced.bad} bad payloads = {produced.user_records:,} user records "
            f"({produced.aggregated_user_records:,} of them in {produced.aggregates:,} KPL "
            "aggregates)",
        ),
        (
            "landed",
            f"{sum(view.landed.values()):,} records in {view.files:,} files; "
            f"{sum(view.dead.values())} dead letters; {view.raw_duplicates} raw duplicates",
        ),
        ("duplicates", f"{checks[3].detail}; {checks[2].detail}"),
        ("lost", f"{lost} events produced but not in the compacted output"),
        ("chaos", "; ".join(chaos) or "none"),
        (
            "workers",
            ", ".join(f"{name} {n:,}" for name, n in sorted(metrics.items()))
            + " (from /metrics of the workers still running)",
        ),
        ("report", _shown(Path(report.removeprefix("file://"))) if report else "-"),
        ("parquet", f"{_shown(workdir / 'compacted')} (current files: sparkjobs.compacted)"),
        ("logs", _shown(workdir / "logs")),
        ("took", f"{time.monotonic() - say.started:.0f} s"),
    ]
    for name, text in lines:
        out.write(f"  {name:<11}{text}\n")
    out.write("\n")
    for check in checks:
        out.write(f"  [{'ok' if check.ok else 'FAIL'}] {check.what}: {check.detail}\n")
    out.flush()


def _shown(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)
