"""Worker processes on the local stack, a light producer, and plain boto3 to watch them.

Modelled on ``tests/support/cluster.py`` but kept apart from the test suite: the
benchmark runs workers with the product's timings (no test speed-ups) and records one
line per batch instead of one per record. Every process is started here and stopped
here by PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consumer.cli.harness import start_worker, stop_processes
from consumer.leases.model import RESERVED_PREFIX

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Workers:
    """``python -m consumer.cli run`` processes sharing one stream and lease table."""

    workdir: Path
    stream: str
    table: str
    settings: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recordings = self.workdir / "recordings"
        self.recordings.mkdir(parents=True, exist_ok=True)

    def start(self, name: str) -> None:
        """Start a worker named ``name`` with the product's defaults plus ``settings``."""
        env = {
            **os.environ,
            "LANDER_STREAM": self.stream,
            "LANDER_LEASE_TABLE": self.table,
            "LANDER_WORKER_ID": name,
            "LANDER_PROCESSOR": "tests.support.recording:RecordingProcessor",
            "LANDER_LOG_FORMAT": "json",
            "RECORDING_DIR": str(self.recordings),
            "PYTHONPATH": str(REPO),
            **self.settings,
        }
        self.procs[name] = start_worker(env, self.workdir / f"{name}.log", cwd=REPO)

    def signal(self, name: str, signum: int) -> None:
        """Send a signal to exactly the worker we started under that name."""
        os.kill(self.procs[name].pid, signum)

    def exit_code(self, name: str) -> int | None:
        """The worker's exit status, or None while it runs."""
        return self.procs[name].poll()

    def stop_all(self, timeout: float = 30.0) -> dict[str, int | None]:
        """SIGTERM every running worker, wait, SIGKILL what is left; by PID only."""
        return stop_processes(self.procs, timeout)

    def log_tail(self, name: str, lines: int = 20) -> str:
        """The last lines the worker logged."""
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class Recordings:
    """Reads the workers' recording files incrementally."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.offsets: dict[Path, int] = {}
        self.events: list[dict[str, Any]] = []

    def poll(self) -> None:
        """Fold in every complete line written since the last poll."""
        for path in sorted(self.directory.glob("*.jsonl")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                chunk = handle.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            for line in complete.decode().splitlines():
                if line.strip():
                    self.events.append({**json.loads(line), "worker": path.stem})

    def first_batch(self, worker: str, shard: str, after: float) -> float | None:
        """When ``worker`` first delivered a record of ``shard`` after wall time ``after``."""
        times = [
            event["t"]
            for event in self.events
            if event["event"] == "record"
            and event["worker"] == worker
            and event["shard"] == shard
            and event["t"] > after
        ]
        return min(times) if times else None

    def delivered(self, worker: str, shard: str, after: float = 0.0) -> set[tuple[str, int]]:
        """The records (sequence, subsequence) of ``shard`` that ``worker`` delivered
        after wall time ``after``."""
        return {
            (event["seq"], event["sub"])
            for event in self.events
            if event["event"] == "record"
            and event["worker"] == worker
            and event["shard"] == shard
            and event["t"] > after
        }

    def last_batch(self, worker: str, shard: str) -> float | None:
        """When ``worker`` last delivered a record of ``shard``."""
        times = [
            event["t"]
            for event in self.events
            if event["event"] == "record" and event["worker"] == worker and event["shard"] == shard
        ]
        return max(times) if times else None


class LeaseTable:
    """The lease table read with boto3 (strongly consistent scans)."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self.dynamodb = dynamodb
        self.table = table

    def owners(self) -> dict[str, str | None]:
        """Each lease's owner, by shard id ({} before the table exists)."""
        try:
            items = self.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        except self.dynamodb.exceptions.ResourceNotFoundException:
            return {}
        owners: dict[str, str | None] = {}
        for item in items:
            if item["leaseKey"]["S"].startswith(RESERVED_PREFIX):
                continue  # a worker-id claim or the board, not a shard lease
            owner = item.get("leaseOwner", {}).get("S")
            owners[item["leaseKey"]["S"]] = None if owner in (None, "", "NULL") else owner
        return owners

    def load(self) -> Counter[str]:
        """How many leases each owner holds."""
        return Counter(owner for owner in self.owners().values() if owner)


class Producer:
    """Puts about ``rate`` records/s, spread evenly over the shards, from a thread."""

    def __init__(self, kinesis: Any, stream: str, hash_keys: Sequence[str], rate: float) -> None:
        self.kinesis = kinesis
        self.stream = stream
        self.hash_keys = list(hash_keys)
        self.rate = rate
        self.sent = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="producer", daemon=True)

    def start(self) -> None:
        """Begin producing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop and wait for the thread."""
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        tick = 0.1
        per_tick = max(1, round(self.rate * tick))
        next_at = time.monotonic()
        while not self._stop.is_set():
            entries: list[dict[str, Any]] = []
            for _ in range(per_tick):
                n = self.sent + len(entries)
                body = {"n": n, "at": time.time(), "source": "bench-failover"}
                entries.append(
                    {
                        "Data": json.dumps(body).encode(),
                        "PartitionKey": f"pk-{n}",
                        "ExplicitHashKey": self.hash_keys[n % len(self.hash_keys)],
                    }
                )
            try:
                result = self.kinesis.put_records(StreamName=self.stream, Records=entries)
                self.sent += len(entries) - int(result.get("FailedRecordCount", 0))
            except Exception:  # the producer must outlive a hiccup of the emulator
                self.failures += 1
            next_at += tick
            self._stop.wait(max(0.0, next_at - time.monotonic()))
