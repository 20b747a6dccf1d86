"""The operator's commands on a live stack, run as a user runs them.

One worker process (``lander run``) serves its metrics and health endpoints while
``lander produce`` writes to the stream and ``lander status`` reads the lease table;
the test checks what each prints and which series the worker exposes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumer.cli.harness import start_worker

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.emulator, pytest.mark.processes, pytest.mark.timeout(180)]


def _env(aws_env: dict[str, str], **settings: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    return {**clean, **aws_env, **settings}


def _lander(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "consumer.cli", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(value for (n, _), value in samples.items() if n == name)


def _wait(condition: object, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Live:
    """A stream, a lease table name and one running worker with its metrics port."""

    def __init__(self, env: dict[str, str], proc: subprocess.Popen[bytes], log: Path) -> None:
        self.env = env
        self.proc = proc
        self.log = log
        self.port = 0

    def find_port(self) -> bool:
        for line in self.log.read_text(errors="replace").splitlines():
            if "metrics and health endpoints listening" in line:
                self.port = int(json.loads(line)["port"])
                return True
        assert self.proc.poll() is None, self.log.read_text()
        return False


@pytest.fixture
def live(aws_env: dict[str, str], tmp_path: Path) -> Iterator[Live]:
    """A 2-shard stream and one worker landing it to a folder."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    kinesis = boto3.client("kinesis", endpoint_url=aws_env["AWS_ENDPOINT_URL_KINESIS"])
    kinesis.create_stream(StreamName=name, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100}
    )
    env = _env(
        aws_env,
        LANDER_STREAM=name,
        LANDER_LEASE_TABLE=f"{name}-leases",
        LANDER_ARCHIVE=(tmp_path / "archive").as_uri(),
        LANDER_WORKER_ID="cli-worker",
        LANDER_FAILOVER_SECONDS="3",
        LANDER_FLUSH_SECONDS="1",
        LANDER_POLL_IDLE_SECONDS="0.2",
        LANDER_METRICS_PORT="0",
        LANDER_LOG_FORMAT="json",
    )
    log = tmp_path / "worker.log"
    proc = start_worker(env, log, cwd=REPO)
    live = Live(env, proc, log)
    try:
        _wait(live.find_port, "the worker's metrics port")
        yield live
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_status_produce_metrics_and_health_on_a_live_worker(live: Live) -> None:
    """What an operator sees: ready worker, produced records read and landed, leases in
    status with lag, the expected series, and a clean hand-back on SIGTERM."""
    _wait(lambda: _get(live.port, "/readyz")[0] == 200, "/readyz to answer 200")
    status, body = _get(live.port, "/healthz")
    assert status == 200
    assert json.loads(body)["worker_id"] == "cli-worker"
    _wait(lambda: len(json.loads(_get(live.port, "/readyz")[1])["leases_held"]) == 2, "2 leases")
    # Board coordination: the worker gives its metrics port as where others wake it.
    started = next(
        json.loads(line) for line in live.log.read_text().splitlines() if '"worker started"' in line
    )
    assert started["wake_address"] == f"127.0.0.1:{live.port}"
    wake = urllib.request.Request(f"http://127.0.0.1:{live.port}/wake", method="POST")
    with urllib.request.urlopen(wake, timeout=10) as answer:
        assert answer.status == 202

    produced = _lander(
        live.env,
        "produce",
        "--count",
        "300",
        "--rate",
        "0",
        "--retry-share",
        "0.1",
        "--aggregate-share",
        "0.5",
        "--bad-records",
        "3",
    )
    assert produced.returncode == 0, produced.stderr
    match = re.search(
        r"produced 300 events, (\d+) producer retries, 3 bad payloads", produced.stdout
    )
    assert match, produced.stdout
    user_records = 300 + int(match.group(1)) + 3
    assert f"({user_records} user records in" in produced.stdout

    def landed_everything() -> bool:
        samples = _samples(_get(live.port, "/metrics")[1])
        return (
            _total(samples, "lander_records_read_total") == user_records
            and _total(samples, "lander_dead_letters_total") == 3
            and _total(samples, "lander_records_landed_total") == user_records - 3
        )

    _wait(landed_everything, "every produced record read, landed or dead-lettered")
    samples = _samples(_get(live.port, "/metrics")[1])
    names = {name for name, _ in samples}
    for expected in (
        "lander_worker_info",
        "lander_leases_held",
        "lander_leases_taken_total",
        "lander_behind_latest_seconds",
        "lander_getrecords_seconds_bucket",
        "lander_getrecords_seconds_count",
        "lander_records_read_total",
        "lander_records_landed_total",
        "lander_bytes_landed_total",
        "lander_files_landed_total",
        "lander_dead_letters_total",
    ):
        assert expected in names, expected
    assert samples[("lander_leases_held", ())] == 2
    assert not [name for name in names if name.endswith("_created")], "no _created twins"
    # The leader assigns the leases.
    assert samples[("lander_leases_taken_total", (("how", "assigned"),))] == 2
    shards = {
        dict(labels)["shard_id"] for name, labels in samples if name == "lander_records_read_total"
    }
    assert len(shards) == 2

    def lag_reported() -> bool:
        result = _lander(live.env, "status", "--json")
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)["shards"]
        return len(rows) == 2 and all(r["lag_ms"] is not None for r in rows)

    _wait(lag_reported, "status to show the lag reported with heartbeats")
    table = _lander(live.env, "status")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["SHARD", "STATE", "OWNER", "CHECKPOINT"]
    rows = [line.split() for line in lines[1:3]]
    assert [row[1:3] for row in rows] == [["owned", "cli-worker"]] * 2
    assert any("2 shards (2 owned); 1 workers own leases" in line for line in lines)
    assert any(line.strip().startswith("cli-worker: 2 leases") for line in lines), lines

    live.proc.send_signal(signal.SIGTERM)
    assert live.proc.wait(timeout=60) == 0
    after = json.loads(_lander(live.env, "status", "--json").stdout)["shards"]
    assert [row["state"] for row in after] == ["free", "free"]
    assert all(row["checkpoint"] != "TRIM_HORIZON" for row in after)


def test_status_errors_name_the_problem(aws_env: dict[str, str]) -> None:
    """No settings, or a stream that does not exist: one line each, no traceback (the
    other kinds of failure: tests/cli/test_failures.py)."""
    missing = _lander(_env(aws_env), "status")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "lander: invalid configuration: LANDER_STREAM is required but not set; "
        "LANDER_LEASE_TABLE is required but not set"
    ]
    absent = _lander(
        _env(aws_env, LANDER_STREAM="nope", LANDER_LEASE_TABLE="no-such-table"), "status"
    )
    assert absent.returncode == 3  # the stream is said first: it is what a worker needs
    assert absent.stderr.strip().splitlines() == [
        f"lander: Kinesis stream nope does not exist (Kinesis at "
        f"{aws_env['AWS_ENDPOINT_URL_KINESIS']}); check LANDER_STREAM, AWS_REGION and the "
        "endpoint"
    ]


def test_produce_rejects_a_bad_share_in_one_line(aws_env: dict[str, str]) -> None:
    """A share outside 0-1 names its variable before anything is sent."""
    result = _lander(_env(aws_env, LANDER_STREAM="s"), "produce", "--retry-share", "2")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lander: invalid configuration: LANDER_PRODUCE_RETRY_SHARE "
        "Input should be less than or equal to 1"
    ]
