"""One exit code and one line per kind of failure, whichever command meets it.

The table is consumer.errors' (docs/operations.md#exit-codes): 1 an endpoint does not
answer, 2 a setting or an extra is missing, 3 what the command works on does not
exist. Each command here runs as a user runs it, in a process of its own, against the
local stack or a port nothing listens on; each must end with its code, exactly one
line on stderr and no traceback, and without waiting out long retries.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from consumer.cli import main
from consumer.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_MISSING, missing_extra
from tests.support.cli import clean_env, run_lander

REPO = Path(__file__).resolve().parents[2]
BOUNDED = 30.0
"""Seconds within which a command must give up on an endpoint that does not answer
(``lander produce`` took 108 s and printed 20 warnings before)."""

pytestmark = [pytest.mark.timeout(180)]

COMMANDS = [
    (("run", "--check"), "lander: "),
    (("status",), "lander: "),
    (("produce", "--count", "10"), "lander produce: "),
]
"""The commands that meet a stream, with the start of their one line."""


def _lander(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_lander(env, *args, timeout=BOUNDED)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


@pytest.fixture
def closed_port() -> Iterator[str]:
    """An endpoint on loopback that refuses connections (bound, never listening)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def stream(aws_env: dict[str, str]) -> str:
    name = f"fail-{uuid.uuid4().hex[:8]}"
    kinesis = boto3.client("kinesis", endpoint_url=aws_env["AWS_ENDPOINT_URL_KINESIS"])
    kinesis.create_stream(StreamName=name, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100}
    )
    return name


@pytest.mark.emulator
@pytest.mark.processes
@pytest.mark.parametrize(("command", "prefix"), COMMANDS)
def test_a_missing_stream_is_exit_3_and_named(
    aws_env: dict[str, str], tmp_path: Path, command: tuple[str, ...], prefix: str
) -> None:
    env = clean_env(
        aws_env,
        LANDER_STREAM="no-such-stream",
        LANDER_LEASE_TABLE="no-such-table",
        LANDER_ARCHIVE=tmp_path.as_uri(),
    )
    done = _lander(env, *command)
    assert done.returncode == EXIT_MISSING, done.stderr
    line = _one_line(done)
    assert line.startswith(f"{prefix}Kinesis stream no-such-stream does not exist (Kinesis at ")
    assert aws_env["AWS_ENDPOINT_URL_KINESIS"] in line


@pytest.mark.emulator
@pytest.mark.processes
def test_a_missing_lease_table_is_exit_3_for_status_and_created_by_nothing_in_check(
    aws_env: dict[str, str], stream: str, tmp_path: Path
) -> None:
    """``status`` names the table; ``run --check`` says start-up would create it and
    leaves the table list as it was."""
    table = f"{stream}-leases"
    env = clean_env(
        aws_env, LANDER_STREAM=stream, LANDER_LEASE_TABLE=table, LANDER_ARCHIVE=tmp_path.as_uri()
    )
    done = _lander(env, "status")
    assert done.returncode == EXIT_MISSING
    assert _one_line(done) == (
        f"lander: lease table {table} does not exist (DynamoDB at "
        f"{aws_env['AWS_ENDPOINT_URL_DYNAMODB']}); a worker creates it when it starts "
        "(lander run)"
    )
    dynamodb = boto3.client("dynamodb", endpoint_url=aws_env["AWS_ENDPOINT_URL_DYNAMODB"])
    before = dynamodb.list_tables()["TableNames"]
    checked = _lander(env, "run", "--check")
    assert checked.returncode == 0, checked.stderr
    assert f"start-up would create the lease table {table}" in checked.stdout
    assert dynamodb.list_tables()["TableNames"] == before


@pytest.mark.processes
@pytest.mark.parametrize(("command", "prefix"), COMMANDS)
def test_an_endpoint_that_refuses_is_exit_1_within_seconds(
    closed_port: str, tmp_path: Path, command: tuple[str, ...], prefix: str
) -> None:
    """Kinesis (and DynamoDB) on a port nothing listens on: one line naming the
    endpoint, exit 1, long before BOUNDED (the subprocess timeout)."""
    aws = {
        "AWS_ENDPOINT_URL_KINESIS": closed_port,
        "AWS_ENDPOINT_URL_DYNAMODB": closed_port,
        "AWS_ENDPOINT_URL_S3": closed_port,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
    }
    env = clean_env(
        aws, LANDER_STREAM="s", LANDER_LEASE_TABLE="leases", LANDER_ARCHIVE=tmp_path.as_uri()
    )
    done = _lander(env, *command)
    assert done.returncode == EXIT_FAILED, done.stderr
    line = _one_line(done)
    assert line.startswith(f"{prefix}cannot reach Kinesis at {closed_port}: ")
    assert "PutRecords failed" not in done.stdout + done.stderr


def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """``missing_extra`` finds what cannot be imported; ``local-stack`` and the Spark
    jobs say it in one line with exit 2 before anything starts."""
    assert missing_extra("local", "json") is None
    assert missing_extra("spark", "json", "no_such_module_x") == (
        "this command needs the spark extra (no_such_module_x not installed): "
        "pip install 'kinesis-lander[spark]'"
    )
    import importlib.util

    real = importlib.util.find_spec

    def without(*absent: str) -> Any:
        def find_spec(name: str, *args: Any) -> Any:
            return None if name in absent else real(name, *args)

        return find_spec

    monkeypatch.setattr(importlib.util, "find_spec", without("moto", "pyspark"))
    for argv, extra in (
        (["local-stack"], "local"),
        (["compact", "--stream", "s", "--window", "2026-11-01"], "spark"),
    ):
        errors: list[str] = []
        monkeypatch.setattr(sys, "stderr", _Lines(errors))
        assert main(argv) == EXIT_CONFIG
        assert errors == [
            f"lander {argv[0]}: this command needs the {extra} extra "
            f"({'moto' if extra == 'local' else 'pyspark'} not installed): "
            f"pip install 'kinesis-lander[{extra}]'"
        ]


class _Lines:
    """A stderr that keeps whole lines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines.extend(line for line in text.splitlines() if line)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.processes
@pytest.mark.emulator
def test_local_stack_creates_the_stream_and_bucket_a_worker_needs(tmp_path: Path) -> None:
    """``local-stack --stream orders --shards 4 --bucket lake`` prints export lines that
    include the worker's settings; the stream is ACTIVE with 4 shards and the bucket
    exists; ``run --check`` then passes with those exports alone."""
    argv = [sys.executable, "-m", "consumer.cli", "local-stack"]
    argv += ["--stream", "orders", "--shards", "4", "--bucket", "lake"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path) as proc:
        assert proc.stdout is not None
        lines: list[str] = []
        try:
            while not lines or not lines[-1].startswith("# local stack running"):
                line = proc.stdout.readline()
                assert line, f"exited early with {proc.wait()}: {lines}"
                lines.append(line.rstrip("\n"))
            exports = dict(
                line.removeprefix("export ").split("=", 1)
                for line in lines
                if line.startswith("export ")
            )
            assert exports["LANDER_STREAM"] == "orders"
            assert exports["LANDER_ARCHIVE"] == "s3://lake/lander"
            assert "# created stream orders (4 shards)" in lines
            assert "# created bucket lake" in lines
            kinesis = boto3.client(
                "kinesis",
                endpoint_url=exports["AWS_ENDPOINT_URL_KINESIS"],
                region_name=exports["AWS_REGION"],
                aws_access_key_id="x",
                aws_secret_access_key="y",
            )
            summary = kinesis.describe_stream_summary(StreamName="orders")
            assert summary["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"
            assert summary["StreamDescriptionSummary"]["OpenShardCount"] == 4
            checked = _lander({**env, **exports}, "run", "--check")
            assert checked.returncode == 0, checked.stderr
            assert "stream orders (4 shards)" in checked.stdout
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0


@pytest.mark.processes
@pytest.mark.emulator
def test_local_stack_refuses_a_stream_it_cannot_create_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    done = subprocess.run(
        [sys.executable, "-m", "consumer.cli", "local-stack", "--stream", "no spaces!"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_CONFIG
    line = _one_line(done)
    assert line.startswith("lander local-stack: cannot create stream: "), line


@pytest.mark.emulator
@pytest.mark.processes
def test_efo_on_an_endpoint_without_fan_out_is_exit_3_with_the_way_out(
    aws_env: dict[str, str], stream: str, tmp_path: Path
) -> None:
    """kinesalite answers the consumer calls with UnknownOperationException: ``run
    --check`` in efo mode refuses (it passed before, and ``lander run`` then failed),
    and ``lander efo describe`` says why instead of an empty message."""
    env = clean_env(
        aws_env,
        LANDER_STREAM=stream,
        LANDER_LEASE_TABLE=f"{stream}-leases",
        LANDER_ARCHIVE=tmp_path.as_uri(),
        LANDER_READ_MODE="efo",
    )
    for args, prefix in (
        (("run", "--check"), "lander: efo read mode: "),
        (("efo", "describe"), f"lander: stream consumer {stream}-leases: "),
    ):
        done = _lander(env, *args)
        assert done.returncode == EXIT_MISSING, done.stderr
        line = _one_line(done)
        assert line.startswith(prefix), line
        assert "does not serve enhanced fan-out (UnknownOperationException" in line
        assert "LANDER_READ_MODE=polling" in line
