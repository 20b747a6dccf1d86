"""Real worker processes on the local stack, and plain boto3 to watch them.

The harness never uses the project's own AWS code to judge the project: streams,
records and the lease table are created and read with boto3.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from consumer.cli.harness import start_worker, stop_processes, wait_stream_active, wait_until

REPO = Path(__file__).resolve().parents[2]

FAST = {
    "LANDER_FAILOVER_SECONDS": "3",
    "LANDER_SHARD_SYNC_SECONDS": "1",
    "LANDER_POLL_IDLE_SECONDS": "0.2",
    "LANDER_SHUTDOWN_SECONDS": "5",
    "LANDER_LOG_FORMAT": "json",
}


@dataclass
class Delivery:
    """One record delivered to one worker."""

    worker: str
    shard: str
    seq: int
    sub: int
    data: str
    t: float


@dataclass
class Cluster:
    """A stream, a lease table, and worker processes recording what they receive."""

    env: dict[str, str]
    workdir: Path
    shards: int
    stream: str = field(default_factory=lambda: f"s-{uuid.uuid4().hex[:10]}")
    table: str = field(default_factory=lambda: f"leases-{uuid.uuid4().hex[:10]}")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    produced: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kinesis = self._client("kinesis")
        self.dynamodb = self._client("dynamodb")
        self.s3 = self._client("s3")
        self.bucket = f"archive-{uuid.uuid4().hex[:10]}"
        self.prefix = "landed"
        self.recordings = self.workdir / "recordings"
        self.recordings.mkdir(parents=True, exist_ok=True)
        self.kinesis.create_stream(StreamName=self.stream, ShardCount=self.shards)
        self.wait_active()

    def _client(self, service: str) -> Any:
        return boto3.client(
            service,
            region_name=self.env["AWS_REGION"],
            endpoint_url=self.env[f"AWS_ENDPOINT_URL_{service.upper()}"],
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
        )

    def wait_active(self) -> None:
        """Wait until the stream accepts writes and reshards."""
        wait_stream_active(self.kinesis, self.stream)

    # -- workers -------------------------------------------------------------------

    def start(self, name: str, **settings: str) -> subprocess.Popen[bytes]:
        """Start ``lander run`` as a separate OS process named ``name``."""
        env = {
            **os.environ,
            **self.env,
            **FAST,
            "LANDER_STREAM": self.stream,
            "LANDER_LEASE_TABLE": self.table,
            "LANDER_WORKER_ID": name,
            "LANDER_PROCESSOR": "tests.support.recording:RecordingProcessor",
            "RECORDING_DIR": str(self.recordings),
            "PYTHONPATH": str(REPO),
            **self.extra_env,
            **settings,
        }
        proc = start_worker(env, self.workdir / f"{name}.log", cwd=REPO)
        self.procs[name] = proc
        return proc

    def signal(self, name: str, signum: int) -> None:
        """Send a signal to exactly the worker we started."""
        os.kill(self.procs[name].pid, signum)

    def stop_all(self, timeout: float = 15) -> dict[str, int | None]:
        """SIGTERM every running worker (SIGCONT first, if stopped) and reap them."""
        return stop_processes(self.procs, timeout)

    def log_text(self, name: str) -> str:
        """What the worker logged."""
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    # -- the stream ----------------------------------------------------------------

    def produce(self, count: int, prefix: str = "r") -> list[str]:
        """Put ``count`` records with unique ids, 100 per PutRecords call."""
        ids = [f"{prefix}-{len(self.produced) + i}" for i in range(count)]
        for start in range(0, count, 100):
            chunk = ids[start : start + 100]
            entries = [
                {"Data": json.dumps({"id": i}).encode(), "PartitionKey": uuid.uuid4().hex}
                for i in chunk
            ]
            while entries:
                result = self.kinesis.put_records(StreamName=self.stream, Records=entries)
                entries = [
                    entry
                    for entry, out in zip(entries, result["Records"], strict=True)
                    if "ErrorCode" in out
                ]
        self.produced.extend(ids)
        return ids

    @contextmanager
    def producing(self, rate: float = 200.0) -> Iterator[None]:
        """Produce in the background at about ``rate`` records/s until the block ends."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                self.produce(max(1, int(rate / 10)))
                stop.wait(0.1)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def put_raw(self, data: bytes, partition_key: str = "raw") -> str:
        """Put one record exactly as given; returns its sequence number."""
        out = self.kinesis.put_record(StreamName=self.stream, Data=data, PartitionKey=partition_key)
        return str(out["SequenceNumber"])

    # -- the archive, read with plain boto3 + gzip + json ----------------------------

    def with_archive(self) -> None:
        """Create the bucket and have workers run the lander into it."""
        self.s3.create_bucket(Bucket=self.bucket)
        self.extra_env.update(
            {
                "LANDER_ARCHIVE": f"s3://{self.bucket}/{self.prefix}",
                "LANDER_PROCESSOR": "consumer.landing.lander:Lander",
            }
        )

    def archive_keys(self) -> list[str]:
        """Every landed object's key (data and dead letters; not the reserved probe)."""
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            keys.extend(
                item["Key"]
                for item in page.get("Contents", [])
                if item["Key"].endswith(".jsonl.gz")
            )
        return keys

    def archive_lines(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(landed lines, dead-letter lines), every object read and decompressed."""
        landed: list[dict[str, Any]] = []
        dead: list[dict[str, Any]] = []
        for key in self.archive_keys():
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            lines = [json.loads(line) for line in gzip.decompress(body).splitlines()]
            (dead if "/dead-letter/" in key else landed).extend(lines)
        return landed, dead

    def archived_ids(self) -> Counter[str]:
        """How often each produced id is in the archive."""
        landed, _ = self.archive_lines()
        return Counter(line["data"]["id"] for line in landed if isinstance(line["data"], dict))

    def wait_all_archived(self, timeout: float = 60) -> Counter[str]:
        """Wait until every produced id is in the archive."""

        def done() -> Counter[str] | None:
            ids = self.archived_ids()
            return ids if all(ids[i] for i in self.produced) else None

        return wait_until(done, timeout, "every produced record archived", step=0.5)  # type: ignore[no-any-return]

    def shard_ids(self) -> list[str]:
        """Every shard of the stream."""
        return [s["ShardId"] for s in self.kinesis.list_shards(StreamName=self.stream)["Shards"]]

    # -- observations --------------------------------------------------------------

    def leases(self) -> dict[str, dict[str, Any]]:
        """The lease table as plain dicts, read with boto3 ({} if the table is gone)."""
        try:
            items = self.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        except self.dynamodb.exceptions.ResourceNotFoundException:
            return {}
        return {
            item["leaseKey"]["S"]: {
                "owner": item.get("leaseOwner", {}).get("S"),
                "counter": int(item["leaseCounter"]["N"]),
                "checkpoint": item.get("checkpoint", {}).get("S"),
                "handoff_to": item.get("handoffTo", {}).get("S"),
                "handoff_ack": item.get("handoffAck", {}).get("S"),
                "kbps": item.get("throughputKBps", {}).get("N"),
            }
            for item in items
            # Worker-id claims and the board share the table; they are not shard leases.
            if not item["leaseKey"]["S"].startswith("lander-")
        }

    def owners(self) -> Counter[str]:
        """How many unfinished leases each owner holds."""
        return Counter(
            lease["owner"]
            for lease in self.leases().values()
            if lease["owner"] and lease["checkpoint"] != "SHARD_END"
        )

    def events(self) -> list[dict[str, Any]]:
        """Every line every worker recorded, with the worker's name."""
        lines = []
        for path in sorted(self.recordings.glob("*.jsonl")):
            # Complete lines only: a worker appending a long batch may be read between
            # two of its writes, and the last line is then cut short.
            complete = path.read_text().split("\n")[:-1]
            for line in complete:
                if line.strip():
                    lines.append({**json.loads(line), "worker": path.stem})
        return lines

    def deliveries(self) -> list[Delivery]:
        """Every record delivered, in recording order per worker."""
        return [
            Delivery(e["worker"], e["shard"], int(e["seq"]), e["sub"], e["data"], e["t"])
            for e in self.events()
            if e["event"] == "record"
        ]

    def delivered_ids(self) -> Counter[str]:
        """How often each produced id was delivered."""
        return Counter(json.loads(d.data)["id"] for d in self.deliveries())

    def wait_all_delivered(self, timeout: float = 60) -> Counter[str]:
        """Wait until every produced id has been delivered at least once."""

        def done() -> Counter[str] | None:
            ids = self.delivered_ids()
            return ids if all(ids[i] for i in self.produced) else None

        return wait_until(done, timeout, "every produced record delivered", step=0.25)  # type: ignore[no-any-return]

    def positions_by_worker(self) -> dict[tuple[str, int, int], set[str]]:
        """Which workers each position was delivered to."""
        seen: dict[tuple[str, int, int], set[str]] = defaultdict(set)
        for d in self.deliveries():
            seen[(d.shard, d.seq, d.sub)].add(d.worker)
        return seen
