"""The chaos run: workers landing a stream while processes die, freeze and join, the
stream reshards, the lease table loses its items and the AWS calls fail.

Workers reach Kinesis, DynamoDB and S3 only through fault-injecting proxies
(:mod:`tests.chaos.proxy`). The producer and the checking reader talk to the
emulators directly, so what they see is the truth. At the end an independent reader
lists the archive bucket and checks every produced record by position; the archive is
then copied to a folder and compacted with Spark, and the output must hold every
produced event id exactly once.

With ``Profile.streams`` 3 one fleet reads three streams at once, and one stream is
created and one deleted mid-run (:mod:`tests.chaos.streams`).

Everything random comes from one seed, printed first, so a failing run can be
replayed: ``python -m tests.chaos --seed N``.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import boto3
from botocore.config import Config

from consumer.cli.emulators import LocalStack
from consumer.cli.harness import Say, WorkerProcess, wait_stream_active
from consumer.cli.produce import Produced, Producer
from consumer.leases.board_item import KEY, LEADER_KEY
from consumer.leases.dynamo_table import WORKERS_SUFFIX
from tests.chaos.diagnose import lease_lines, log_tail, missing_by_shard
from tests.chaos.proxy import FaultProxy, FaultRates, ProxyThread
from tests.chaos.streams import At, ChaosStream, pattern, plan_streams, total

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS = (
    "kill",
    "freeze",
    "kill_leader",
    "freeze_leader",
    "term",
    "join",
    "split",
    "merge",
    "delete_leases",
    "misconfigured",
)
"""``*_leader`` picks the board's leader (any live worker while no slot is readable)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """How long and how hard."""

    name: str
    seconds: float
    rate: float
    shards: int = 4
    workers: int = 3
    max_workers: int = 4
    events_every: float = 0.0
    """0: each kind of event once, spread over the run; else one event this often."""
    failover_seconds: float = 3.0
    flush_seconds: float = 2.0
    retry_share: float = 0.02
    aggregate_share: float = 0.3
    bad_records: int = 5
    rates: FaultRates = field(
        default_factory=lambda: FaultRates(
            throttle=0.02, error=0.02, reset=0.01, lost=0.01, slow=0.02, hang=0.001
        )
    )
    s3_rates: FaultRates = field(
        # S3 sees a request per landed file, not per poll: higher rates so that a short
        # run still loses a few PUT responses after the object was written.
        default_factory=lambda: FaultRates(
            throttle=0.03, error=0.03, reset=0.02, lost=0.05, slow=0.03
        )
    )
    catch_up_seconds: float = 240.0
    read_mode: str = "polling"
    """efo: workers read through SubscribeToShard, on kinesis-local."""
    streams: int = 1
    """3: one fleet reads three streams, one created and one deleted mid-run."""


SHORT = Profile("short", seconds=45, rate=400)


def soak(minutes: float, rate: float = 650) -> Profile:
    """The long profile: an event every ~40 s and 1M+ records at the default rate."""
    return Profile(
        "soak",
        seconds=minutes * 60,
        rate=rate,
        events_every=40,
        catch_up_seconds=900,
    )


@dataclass
class Outcome:
    """What the run did and what the checks found."""

    seed: int
    profile: str
    produced: Produced | None = None
    events: list[str] = field(default_factory=list)
    faults: dict[str, dict[str, int]] = field(default_factory=dict)
    missing: int = 0
    unexpected: int = 0
    raw_duplicates: int = 0
    landed: int = 0
    dead_letters: int = 0
    dead_expected: int = 0
    files: int = 0
    compacted_rows: int = 0
    compacted_ids: int = 0
    lost_ids: int = 0
    producer_removed: int = 0
    transport_removed: int = 0
    worker_exits: dict[str, int | None] = field(default_factory=dict)
    misconfigured_exits: dict[str, int | None] = field(default_factory=dict)
    """Workers that joined with a broken archive: 0 (gave back, stopped cleanly) or 3
    (refused at start)."""
    streams: dict[str, int] = field(default_factory=dict)
    """Events produced per stream."""
    stream_changes_left: int = 0
    """Streams still to be created or deleted when the run ended (must be 0)."""
    seconds: float = 0.0
    replay_flags: str = ""
    diagnosis: list[str] = field(default_factory=list)
    """When records were missing at the end: where, the lease table, the worker logs."""

    @property
    def ok(self) -> bool:
        """Exactly once: nothing missing, nothing doubled, every id once after compaction."""
        produced = self.produced
        return (
            produced is not None
            and self.missing == 0
            and self.unexpected == 0
            and self.raw_duplicates == 0
            and self.dead_letters == self.dead_expected
            and self.lost_ids == 0
            and self.compacted_rows == self.compacted_ids == produced.events
            and all(code in (0, 3) for code in self.misconfigured_exits.values())
            and self.stream_changes_left == 0
        )

    def report(self) -> str:
        """The counts, one per line, and the seed to replay."""
        p = self.produced
        lines = [
            f"chaos {self.profile} seed={self.seed}: {'OK' if self.ok else 'FAILED'} "
            f"in {self.seconds:.0f} s (replay: python -m tests.chaos --profile "
            f"{self.profile} --seed {self.seed}{self.replay_flags})",
            f"  produced      {p.events if p else 0:,} events, {p.retries if p else 0:,} producer "
            f"retries, {p.bad if p else 0} bad, {p.aggregated_user_records if p else 0:,} in "
            f"KPL aggregates",
            f"  archive       {self.landed:,} records in {self.files:,} files; missing "
            f"{self.missing}, unexpected {self.unexpected}, raw duplicates "
            f"{self.raw_duplicates}; dead letters {self.dead_letters}/{self.dead_expected}",
            f"  compacted     {self.compacted_rows:,} rows, {self.compacted_ids:,} distinct ids, "
            f"lost {self.lost_ids}; removed producer {self.producer_removed:,}, transport "
            f"{self.transport_removed:,}",
            f"  events        {'; '.join(self.events)}",
            "  faults        "
            + "; ".join(
                f"{svc}: " + ", ".join(f"{k} {v:,}" for k, v in sorted(c.items()))
                for svc, c in sorted(self.faults.items())
            ),
            f"  worker exits  {self.worker_exits}; misconfigured {self.misconfigured_exits}",
        ]
        if len(self.streams) > 1:
            lines.insert(
                2,
                "  streams       "
                + ", ".join(f"{name} {n:,}" for name, n in self.streams.items())
                + f"; changes not made {self.stream_changes_left}",
            )
        if self.diagnosis:
            lines.append("  diagnosis")
            lines.extend(f"    {line}" for line in self.diagnosis)
        return "\n".join(lines)


def wait_for_checks(worker: WorkerProcess, seconds: float = 90) -> None:
    """Until the worker's start-up checks passed, it exited, or ``seconds`` went by."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and worker.alive():
        if "start-up checks passed" in worker.log_path.read_text(errors="replace"):
            return
        time.sleep(0.05)


class Chaos:
    """One run of a profile with a seed."""

    every_event: ClassVar[bool] = False
    """Fire events still planned when production ends (a short production whose
    events were held up by the ones that block: a freeze, a start-up wait)."""

    def __init__(self, profile: Profile, seed: int, workdir: Path, say: Say | None = None) -> None:
        self.profile = profile
        self.seed = seed
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.say = say or Say()
        self.outcome = Outcome(seed, profile.name)
        if profile.read_mode != "polling":
            self.outcome.replay_flags += f" --read-mode {profile.read_mode}"
        if profile.streams != 1:
            self.outcome.replay_flags += f" --streams {profile.streams}"
        self.streams: list[ChaosStream] = plan_streams(
            profile.streams, seed, profile.shards, profile.rate, profile.bad_records
        )
        self.outcome.stream_changes_left = sum(s.created + s.deleted for s in self.streams)
        self._next_landed_check = 0.0
        self.workers: dict[str, WorkerProcess] = {}
        self.retired: list[WorkerProcess] = []
        self.misconfigured: list[WorkerProcess] = []
        self._elsewhere: LocalStack | None = None
        """A second stack, whose S3 the misconfigured workers land in (started once)."""
        self._next_worker = 1
        self.stream = f"chaos-{seed}"
        self.table = f"chaos-{seed}-leases"
        self.bucket = f"chaos-{seed}"

    # -- the run ---------------------------------------------------------------------

    def run(self, spark: SparkSession | None = None) -> Outcome:
        """Run the profile, check the archive, compact, check the output."""
        started = time.monotonic()
        self.say(f"chaos {self.profile.name}: seed {self.seed}")
        kinesis = "kinesis-local" if self.profile.read_mode == "efo" else "kinesalite"
        with LocalStack(kinesis=kinesis) as stack:
            env = stack.env()
            self.direct = {s: self._client(env, s) for s in ("kinesis", "dynamodb", "s3")}
            proxies = [
                FaultProxy(
                    service,
                    env[f"AWS_ENDPOINT_URL_{service.upper()}"],
                    self.profile.s3_rates if service == "s3" else self.profile.rates,
                    seed=self.seed + n,
                )
                for n, service in enumerate(("kinesis", "dynamodb", "s3"))
            ]
            with ProxyThread(proxies) as proxy_thread:
                self.worker_env = self._worker_env(env, proxies)
                self._create()
                try:
                    asyncio.run(self._produce_with_chaos(env))
                    self._catch_up()
                    for proxy in proxies:
                        proxy.enabled = False  # let the graceful stops finish quickly
                    self._stop_workers()
                finally:
                    for worker in [*self.workers.values(), *self.retired, *self.misconfigured]:
                        if worker.alive():
                            worker.stop(signal.SIGKILL, timeout=5)
                    if self._elsewhere is not None:
                        self._elsewhere.stop()
                self.outcome.faults = proxy_thread.counts()
            self._collect()
        self._finish(spark)
        self.outcome.seconds = time.monotonic() - started
        return self.outcome

    def _collect(self) -> None:
        """With the workers stopped and the emulators up: download the archive."""
        self._archive = self._download()

    def _finish(self, spark: SparkSession | None) -> None:
        """With the emulators gone: compact the archive and check the output."""
        self._compact(self._archive, spark)

    @staticmethod
    def _client(env: dict[str, str], service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=env[f"AWS_ENDPOINT_URL_{service.upper()}"],
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"max_attempts": 10, "mode": "standard"}),
        )

    def _worker_env(self, env: dict[str, str], proxies: list[FaultProxy]) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
        several = len(self.streams) > 1
        # An empty LANDER_STREAMS names no stream: a worker refuses it, so it is left unset.
        streams = {"LANDER_STREAMS": pattern(self.seed), "LANDER_STREAMS_SYNC_SECONDS": "2"}
        settings = {
            "LANDER_STREAM": "" if several else self.stream,
            **(streams if several else {}),
            "LANDER_LEASE_TABLE": self.table,
            "LANDER_ARCHIVE": f"s3://{self.bucket}/landed",
            "LANDER_EVENT_ID_POINTER": "/event_id",
            "LANDER_FAILOVER_SECONDS": str(self.profile.failover_seconds),
            "LANDER_FLUSH_SECONDS": str(self.profile.flush_seconds),
            "LANDER_SHARD_SYNC_SECONDS": "2",
            "LANDER_POLL_IDLE_SECONDS": "0.25",
            "LANDER_SHUTDOWN_SECONDS": "10",
            "LANDER_METRICS_PORT": "0",
            "LANDER_LOG_FORMAT": "json",
            "LANDER_READ_MODE": self.profile.read_mode,
        }
        endpoints = {f"AWS_ENDPOINT_URL_{p.service.upper()}": p.url for p in proxies}
        return {**clean, **env, **endpoints, **settings}

    def _create(self) -> None:
        kinesis, s3 = self.direct["kinesis"], self.direct["s3"]
        for stream in self.streams:
            if not stream.created:
                kinesis.create_stream(StreamName=stream.name, ShardCount=stream.shards)
        for stream in self.streams:
            if not stream.created:
                wait_stream_active(kinesis, stream.name)
        s3.create_bucket(Bucket=self.bucket)
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        for _ in range(self.profile.workers):
            self._start_worker()
        self.say(f"{self.profile.shards} shards, {self.profile.workers} workers, faults on")

    def _wait_active(self) -> None:
        wait_stream_active(self.direct["kinesis"], self.stream)

    def _start_worker(self) -> str:
        name = f"w{self._next_worker}"
        self._next_worker += 1
        env = {**self.worker_env, "LANDER_WORKER_ID": f"chaos-{name}"}
        self.workers[name] = WorkerProcess(name, env, self.workdir / "logs" / f"{name}.log")
        return name

    # -- producing and breaking things ---------------------------------------------

    async def _produce_with_chaos(self, env: dict[str, str]) -> None:
        from consumer.aws import Clients

        saved = dict(os.environ)
        os.environ.update(env)  # the producers write to the emulator directly
        try:
            async with Clients() as clients:
                self._kinesis = clients.kinesis
                for stream in self.streams:
                    if not stream.starts:
                        self._start_producer(stream)
                await self._events()
                for stream in self.streams:
                    if stream.task is not None:
                        stream.produced = await stream.task
        finally:
            os.environ.clear()
            os.environ.update(saved)
        p = self.outcome.produced = total(self.streams)
        self.outcome.streams = {
            s.name: s.produced.events for s in self.streams if s.produced is not None
        }
        self.say(f"produced {p.user_records:,} user records ({p.events:,} events)")

    def _start_producer(self, stream: ChaosStream) -> None:
        profile = self.profile
        spec = stream.spec(profile.seconds, self.seed, profile.retry_share, profile.aggregate_share)
        stream.producer = Producer(self._kinesis, spec, ledger=True)
        stream.task = asyncio.create_task(stream.producer.run())

    def _schedule(self) -> list[tuple[float, str]]:
        length = self.profile.seconds
        if not self.profile.events_every:
            kinds = list(EVENTS)
            self.rng.shuffle(kinds)
            step = length * 0.8 / len(kinds)
            return [
                (length * 0.1 + i * step + self.rng.uniform(0, step / 2), k)
                for i, k in enumerate(kinds)
            ]
        plan = []
        at = self.profile.events_every
        while at < length * 0.95:
            plan.append((at + self.rng.uniform(-5, 5), self.rng.choice(EVENTS)))
            at += self.profile.events_every
        return plan

    async def _events(self) -> None:
        plan = self._schedule()
        main = self.streams[0]
        assert main.task is not None
        assert main.producer is not None
        started = time.monotonic()
        last_progress = 0.0
        changes_until = float("inf")
        while time.monotonic() < changes_until:
            elapsed = time.monotonic() - started
            if main.task.done():
                if self.outcome.stream_changes_left == 0 and not (plan and self.every_event):
                    break
                changes_until = min(changes_until, time.monotonic() + self.profile.catch_up_seconds)
            while plan and plan[0][0] <= elapsed:
                _, kind = plan.pop(0)
                what = await asyncio.to_thread(self._event, kind)
                if what:
                    self.outcome.events.append(f"{elapsed:.0f}s {what}")
                    self.say(what)
            what, created = await asyncio.to_thread(self._change_streams, elapsed)
            if created is not None:
                self._start_producer(created)
            if what:
                self.outcome.events.append(f"{elapsed:.0f}s {what}")
                self.say(what)
            self._reap()
            if time.monotonic() - last_progress > 15:
                last_progress = time.monotonic()
                r = main.producer.result
                self.say(
                    f"produced {r.events:,}/{main.producer.spec.count:,} (main stream); "
                    f"workers {sorted(self._live())}"
                )
            await asyncio.sleep(0.2)

    def _change_streams(self, elapsed: float) -> tuple[str | None, ChaosStream | None]:
        """Create a stream when its time comes (returned, for its producer to start);
        delete one once its producer is done and every record it got has landed (what a
        deleted stream held before it landed is lost by any reader, so that is not what
        this checks)."""
        kinesis = self.direct["kinesis"]
        for stream in self.streams:
            if (
                stream.created
                and stream.task is None
                and elapsed >= stream.starts * self.profile.seconds
            ):
                kinesis.create_stream(StreamName=stream.name, ShardCount=stream.shards)
                wait_stream_active(kinesis, stream.name)
                self.outcome.stream_changes_left -= 1
                return f"stream {stream.name} created ({stream.shards} shards)", stream
            if (
                stream.deleted
                and not stream.gone
                and stream.task is not None
                and stream.task.done()
            ):
                if time.monotonic() < self._next_landed_check:
                    continue
                self._next_landed_check = time.monotonic() + 3
                stream.produced = stream.task.result()
                landed, _, _ = self._read_archive(f"landed/stream={stream.name}/")
                if stream.places() - set(landed):
                    continue
                kinesis.delete_stream(StreamName=stream.name)
                stream.gone = True
                self.outcome.stream_changes_left -= 1
                events = stream.produced.events
                return f"stream {stream.name} deleted, its {events:,} events landed", None
        return None, None

    def _live(self) -> list[str]:
        return [name for name, w in self.workers.items() if w.alive()]

    def _reap(self) -> None:
        """A worker that exited by itself is a finding, not chaos: restart and note it."""
        for name, worker in list(self.workers.items()):
            if not worker.alive():
                code = worker.proc.returncode
                self.outcome.worker_exits[name] = code
                self.retired.append(self.workers.pop(name))
                self.outcome.events.append(f"{name} exited by itself ({code})")
                self._start_worker()

    def _event(self, kind: str) -> str | None:
        live = self._live()
        if kind in ("kill", "freeze", "kill_leader", "freeze_leader", "term") and len(live) < 2:
            kind = "join"
        if kind in ("kill", "kill_leader"):
            name = self._leader(live) if kind == "kill_leader" else self.rng.choice(live)
            self._retire(name, signal.SIGKILL)
            new = self._start_worker()
            return f"kill -9 {name}{' (leader)' * (kind == 'kill_leader')}, {new} started"
        if kind in ("freeze", "freeze_leader"):
            name = self._leader(live) if kind == "freeze_leader" else self.rng.choice(live)
            worker = self.workers[name]
            pause = self.profile.failover_seconds * 2 + 1
            worker.proc.send_signal(signal.SIGSTOP)
            time.sleep(pause)
            worker.proc.send_signal(signal.SIGCONT)
            leader = " (leader)" if kind == "freeze_leader" else ""
            return f"SIGSTOP {name}{leader} for {pause:.0f} s (past failover), then SIGCONT"
        if kind == "term":
            name = self.rng.choice(live)
            code = self._retire(name, signal.SIGTERM)
            new = self._start_worker()
            return f"SIGTERM {name} (exit {code}), {new} started"
        if kind == "join":
            if len(live) >= self.profile.max_workers:
                return None
            return f"{self._start_worker()} joined"
        if kind == "split":
            return self._split()
        if kind == "merge":
            return self._merge()
        if kind == "delete_leases":
            return self._delete_leases()
        if kind == "misconfigured":
            return self._misconfigured()
        raise AssertionError(kind)

    def _leader(self, live: list[str]) -> str:
        """The worker that leads, as the leader item in the workers table names it; any
        live worker when it names none that lives."""
        dynamodb = self.direct["dynamodb"]
        try:
            item = dynamodb.get_item(
                TableName=self.table + WORKERS_SUFFIX,
                Key={KEY: {"S": LEADER_KEY}},
                ConsistentRead=True,
            )
        except dynamodb.exceptions.ResourceNotFoundException:
            item = {}  # no worker has made the workers table yet
        leader = str(item.get("Item", {}).get("w", {}).get("S", "")).removeprefix("chaos-")
        return leader if leader in live else self.rng.choice(live)

    def _misconfigured(self) -> str:
        """A worker joins whose bucket is deleted right after its start-up checks: it
        may take a shard, must fail to land it, give it back and take nothing more,
        while the fleet lands everything exactly once. (With the faults on, its checks
        may fail instead: then it is refused at start, exit 3.)

        It lands as the fleet does, in the fleet's archive (a worker that lands
        elsewhere is refused at start by the landing agreement, and would test only
        that), but its S3 is a second emulator, whose bucket of that name is deleted."""
        name = f"bad{len(self.misconfigured) + 1}"
        if self._elsewhere is None:
            self._elsewhere = LocalStack().start()
        elsewhere = self._elsewhere.env()
        s3 = self._client(elsewhere, "s3")
        if self.bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
            s3.create_bucket(Bucket=self.bucket)
        env = {
            **self.worker_env,
            "LANDER_WORKER_ID": f"chaos-{name}",
            "AWS_ENDPOINT_URL_S3": elsewhere["AWS_ENDPOINT_URL_S3"],
        }
        worker = WorkerProcess(name, env, self.workdir / "logs" / f"{name}.log")
        self.misconfigured.append(worker)
        wait_for_checks(worker)
        for item in s3.list_objects_v2(Bucket=self.bucket).get("Contents", []):
            s3.delete_object(Bucket=self.bucket, Key=item["Key"])
        s3.delete_bucket(Bucket=self.bucket)
        if not worker.alive():
            code = worker.proc.returncode
            self.outcome.misconfigured_exits[name] = code
            return f"{name} (bucket deleted) refused at start, exit {code}"
        return f"{name} joined; its bucket was deleted after its start-up checks"

    def _retire(self, name: str, signum: int) -> int | None:
        worker = self.workers.pop(name)
        code = worker.stop(signum, timeout=30)
        self.outcome.worker_exits[name] = code
        self.retired.append(worker)
        return code

    def _open_shards(self) -> list[dict[str, Any]]:
        listed = self.direct["kinesis"].list_shards(StreamName=self.stream)["Shards"]
        return [s for s in listed if "EndingSequenceNumber" not in s["SequenceNumberRange"]]

    def _split(self) -> str | None:
        shards = self._open_shards()
        if len(shards) >= 8:
            return None
        shard = self.rng.choice(shards)
        low = int(shard["HashKeyRange"]["StartingHashKey"])
        high = int(shard["HashKeyRange"]["EndingHashKey"])
        self.direct["kinesis"].split_shard(
            StreamName=self.stream,
            ShardToSplit=shard["ShardId"],
            NewStartingHashKey=str((low + high) // 2),
        )
        self._wait_active()
        return f"split {shard['ShardId']}"

    def _merge(self) -> str | None:
        shards = sorted(
            self._open_shards(), key=lambda s: int(s["HashKeyRange"]["StartingHashKey"])
        )
        pairs = [
            (a, b)
            for a, b in itertools.pairwise(shards)
            if int(a["HashKeyRange"]["EndingHashKey"]) + 1
            == int(b["HashKeyRange"]["StartingHashKey"])
        ]
        if not pairs or len(shards) <= 2:
            return None
        a, b = self.rng.choice(pairs)
        self.direct["kinesis"].merge_shards(
            StreamName=self.stream, ShardToMerge=a["ShardId"], AdjacentShardToMerge=b["ShardId"]
        )
        self._wait_active()
        return f"merge {a['ShardId']} + {b['ShardId']}"

    def _delete_leases(self) -> str | None:
        if any("lease items deleted" in e for e in self.outcome.events):
            return None
        dynamodb = self.direct["dynamodb"]
        try:
            items = dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        except dynamodb.exceptions.ResourceNotFoundException:
            return None  # no worker has made the table yet (a slow start): nothing to delete
        for item in items:
            dynamodb.delete_item(TableName=self.table, Key={"leaseKey": item["leaseKey"]})
        return f"{len(items)} lease items deleted"

    # -- after -----------------------------------------------------------------------

    def _read_archive(self, prefix: str = "") -> tuple[Counter[At], Counter[At], int]:
        s3 = self.direct["s3"]
        landed: Counter[At] = Counter()
        dead: Counter[At] = Counter()
        files = 0
        for key in self._keys(prefix):
            body = gzip.decompress(s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
            target = dead if "/dead-letter/" in f"/{key}" else landed
            files += target is landed
            for raw in body.splitlines():
                line = json.loads(raw)
                target[
                    (
                        str(line["stream"]),
                        str(line["shard_id"]),
                        str(line["sequence_number"]),
                        int(line["subsequence_number"]),
                    )
                ] += 1
        return landed, dead, files

    def _keys(self, prefix: str = "") -> list[str]:
        keys: list[str] = []
        paginator = self.direct["s3"].get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            keys.extend(
                o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(".jsonl.gz")
            )
        return keys

    def _catch_up(self) -> None:
        wanted = self._places()
        deadline = time.monotonic() + self.profile.catch_up_seconds
        while True:
            self._reap()
            landed, dead, files = self._read_archive()
            missing = len(wanted - set(landed))
            if missing == 0 or time.monotonic() > deadline:
                break
            self.say(f"waiting for the archive: {missing:,} records to go")
            time.sleep(3)
        self._check(landed, dead, files)
        if self.outcome.missing:
            self.outcome.diagnosis = self._diagnose(wanted - set(landed))

    def _diagnose(self, missing: set[At]) -> list[str]:
        """Where the records are missing, the lease table, and what each worker said."""
        lines = ["missing records by shard:", *missing_by_shard(missing), "lease table:"]
        dynamodb = self.direct["dynamodb"]
        for table in (self.table, self.table + WORKERS_SUFFIX):
            try:
                pages = dynamodb.get_paginator("scan").paginate(
                    TableName=table, ConsistentRead=True
                )
                lines.extend(lease_lines(item for page in pages for item in page["Items"]))
            except Exception as exc:  # the diagnosis must not hide the finding
                lines.append(f"(could not read {table}: {exc!r})")
        for worker in [*self.workers.values(), *self.misconfigured, *self.retired]:
            state = "alive" if worker.alive() else f"exited {worker.proc.returncode}"
            lines.append(f"log of {worker.name} ({state}):")
            lines.extend(f"  {line}" for line in log_tail(worker.log_path))
        return lines

    def _places(self, *, bad: bool = False) -> set[At]:
        return set().union(*(stream.places(bad=bad) for stream in self.streams))

    def _check(self, landed: Counter[At], dead: Counter[At], files: int) -> None:
        wanted, bad = self._places(), self._places(bad=True)
        o = self.outcome
        o.missing = len(wanted - set(landed))
        o.unexpected = len(set(landed) - wanted)
        o.raw_duplicates = sum(n - 1 for n in landed.values() if n > 1)
        o.landed = sum(landed.values())
        o.files = files
        o.dead_letters = len(set(dead) & bad)
        o.dead_expected = len(bad)
        self.say(
            f"archive: {o.landed:,} records, missing {o.missing}, raw duplicates "
            f"{o.raw_duplicates}, dead letters {o.dead_letters}/{o.dead_expected}"
        )

    def _stop_workers(self) -> None:
        for name in list(self.workers):
            code = self._retire(name, signal.SIGTERM)
            self.say(f"{name} stopped (exit {code})")
        for worker in self.misconfigured:
            if worker.alive():
                code = worker.stop(signal.SIGTERM, timeout=30)
                self.outcome.misconfigured_exits[worker.name] = code
                self.say(f"{worker.name} (misconfigured) stopped (exit {code})")

    def _download(self) -> Path:
        root = self.workdir / "archive"
        s3 = self.direct["s3"]
        for key in self._keys():
            path = root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        return root / "landed"

    def _compact(self, archive: Path, spark: SparkSession | None) -> None:
        from sparkjobs.catalog import table_ref
        from sparkjobs.compaction.compact import CompactJob, compact
        from sparkjobs.session import get_session
        from sparkjobs.table.compacted import read
        from sparkjobs.window import Window

        own = spark is None
        session = spark or get_session("local[2]", app="lander-chaos")
        output = (self.workdir / "compacted").as_uri()
        runs = [
            (stream.name, Window.parse(path.name.removeprefix("dt=")))
            for stream in self.streams
            for path in sorted((archive / f"stream={stream.name}").glob("dt=*"))
        ]
        ids: set[str] = set()
        o = self.outcome
        try:
            for stream, window in runs:  # every stream and day in one Spark session
                manifest = compact(
                    session, CompactJob(archive.as_uri(), stream, window, output, strict=True)
                )
                o.producer_removed += manifest.total("producer")
                o.transport_removed += manifest.total("transport")
                frame = read(session, table_ref(output, stream), window)
                day_ids = [str(r["event_id"]) for r in frame.select("event_id").collect()]
                o.compacted_rows += len(day_ids)
                ids.update(day_ids)
        finally:
            if own:
                session.stop()
        produced: set[str] = set()
        for chaos_stream in self.streams:
            if chaos_stream.produced is not None:
                produced |= chaos_stream.produced.event_ids()
        o.compacted_ids = len(ids)
        o.lost_ids = len(produced - ids)
        self.say(
            f"compacted: {o.compacted_rows:,} rows, {o.compacted_ids:,} ids, lost {o.lost_ids}"
        )


def run(profile: Profile, seed: int, workdir: Path, spark: SparkSession | None = None) -> Outcome:
    """Run one chaos profile; returns the outcome (its ``report()`` is printable)."""
    return Chaos(profile, seed, workdir).run(spark)
