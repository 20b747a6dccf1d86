"""deploy/local/bootstrap.py against a real server: moto, one port for every service.

moto serves Kinesis, DynamoDB and S3 on one port, as LocalStack's edge port does, so
the script is pointed at it exactly as docker-compose points it at LocalStack: through
``LOCALSTACK_HOST``; and, as a stack of one emulator per service is, through the
per-service ``AWS_ENDPOINT_URL_*`` variables. The server is the project's serialised
moto (``python -m consumer.cli.emulators.moto_server``), started here as a child on
127.0.0.1 with an ephemeral port and stopped by its PID.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from consumer.leases.dynamo_table import owner_index

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "local" / "bootstrap.py"
STREAM = "smoke-orders"
TABLE = "smoke-orders-leases"
BUCKET = "smoke-bucket"
PREFIX = "kinesis"

pytestmark = [pytest.mark.emulator, pytest.mark.processes]  # a moto server, the script


@pytest.fixture(scope="module")
def moto_port() -> Iterator[int]:
    """A serialised moto server on 127.0.0.1; its port."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "consumer.cli.emulators.moto_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # {"port": N, "host": "127.0.0.1"} once listening
        if not line:
            pytest.fail(f"moto server (pid {proc.pid}) exited with {proc.wait(5)}")
        yield int(json.loads(line)["port"])
    finally:
        # Closing stdin makes it exit by itself; SIGTERM this PID only as a backstop.
        if proc.stdin is not None:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def script_env(port: int) -> dict[str, str]:
    """The compose environment of the bootstrap service, aimed at moto."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "LANDER_", "LOCALSTACK_"))
    }
    env.update(
        {
            "LOCALSTACK_HOST": f"127.0.0.1:{port}",
            "AWS_REGION": "us-east-1",
            "LANDER_STREAM": STREAM,
            "LANDER_LEASE_TABLE": TABLE,
            "LANDER_ARCHIVE": f"s3://{BUCKET}/{PREFIX}",
        }
    )
    return env


def run_script(
    port: int, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The script with ``args``, in the compose environment (or ``env``)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=script_env(port) if env is None else env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def client(service: str, port: int) -> Any:
    return boto3.client(
        service,
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_bootstrap_creates_stream_and_bucket_idempotently(moto_port: int) -> None:
    first = run_script(moto_port, "bootstrap", "--shards", "3")
    assert first.returncode == 0, first.stderr
    assert f"stream {STREAM} created with 3 shards" in first.stdout
    assert f"bucket {BUCKET} created" in first.stdout
    assert f"lease table {TABLE} created" in first.stdout

    again = run_script(moto_port, "bootstrap", "--shards", "3")
    assert again.returncode == 0, again.stderr
    assert f"stream {STREAM} exists with 3 open shards" in again.stdout
    assert f"bucket {BUCKET} exists" in again.stdout
    assert f"lease table {TABLE} exists" in again.stdout

    kinesis = client("kinesis", moto_port)
    summary = kinesis.describe_stream_summary(StreamName=STREAM)["StreamDescriptionSummary"]
    assert summary["StreamStatus"] == "ACTIVE"
    assert summary["OpenShardCount"] == 3
    assert len(kinesis.list_shards(StreamName=STREAM)["Shards"]) == 3
    client("s3", moto_port).head_bucket(Bucket=BUCKET)
    # The table the workers would have made: same key, attributes, owner index, billing.
    table = client("dynamodb", moto_port).describe_table(TableName=TABLE)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["KeySchema"] == [{"AttributeName": "leaseKey", "KeyType": "HASH"}]
    assert sorted(d["AttributeName"] for d in table["AttributeDefinitions"]) == [
        "leaseKey",
        "leaseOwner",
    ]
    index = table["GlobalSecondaryIndexes"][0]
    assert {k: index[k] for k in owner_index()} == owner_index()
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    workers = client("dynamodb", moto_port).describe_table(TableName=TABLE + "-workers")["Table"]
    assert workers["KeySchema"] == [{"AttributeName": "itemKey", "KeyType": "HASH"}]
    assert workers["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def _bootstrap_module() -> Any:
    spec = importlib.util.spec_from_file_location("lander_bootstrap", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_each_service_takes_its_own_variable_then_the_shared_one_then_localstack() -> None:
    bootstrap = _bootstrap_module()
    found = bootstrap.endpoints(
        {
            "AWS_ENDPOINT_URL_KINESIS": "http://127.0.0.1:4567",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
            "LOCALSTACK_HOST": "localstack:4566",
        }
    )
    assert found == {
        "kinesis": "http://127.0.0.1:4567",
        "dynamodb": "http://127.0.0.1:5000",
        "s3": "http://127.0.0.1:5000",
    }
    edge = bootstrap.endpoints({"LOCALSTACK_HOST": "localstack:4566"})
    assert set(edge.values()) == {"http://localstack:4566"}
    with pytest.raises(bootstrap.ConfigurationError, match=r"no endpoint for dynamodb, s3: set"):
        bootstrap.endpoints({"AWS_ENDPOINT_URL_KINESIS": "http://127.0.0.1:4567"})
    with pytest.raises(bootstrap.ConfigurationError, match="not an http"):
        bootstrap.endpoints({"AWS_ENDPOINT_URL": "localhost"})


def test_per_service_endpoints_alone_are_enough(moto_port: int) -> None:
    """No LOCALSTACK_HOST; a shared endpoint that answers nothing loses to each
    service's own variable."""
    env = script_env(moto_port)
    del env["LOCALSTACK_HOST"]
    moto = f"http://127.0.0.1:{moto_port}"
    env.update(
        {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # discard: refused
            "AWS_ENDPOINT_URL_KINESIS": moto,
            "AWS_ENDPOINT_URL_DYNAMODB": moto,
            "AWS_ENDPOINT_URL_S3": moto,
            "LANDER_STREAM": "per-service-orders",
            "LANDER_ARCHIVE": "s3://per-service-bucket/kinesis",
        }
    )
    done = run_script(moto_port, "bootstrap", "--shards", "1", env=env)
    assert done.returncode == 0, done.stderr
    assert "stream per-service-orders created with 1 shards" in done.stdout
    client("s3", moto_port).head_bucket(Bucket="per-service-bucket")


def test_no_endpoint_is_a_configuration_error_not_a_call_to_aws(moto_port: int) -> None:
    env = script_env(moto_port)
    del env["LOCALSTACK_HOST"]
    done = run_script(moto_port, "smoke", "--timeout", "1", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("bootstrap.py: no endpoint for kinesis, dynamodb, s3: set")
    assert len(done.stderr.strip().splitlines()) == 1


def test_bootstrap_rejects_bad_configuration(moto_port: int, tmp_path: Path) -> None:
    env = script_env(moto_port)
    env["LANDER_ARCHIVE"] = (tmp_path / "archive").as_uri()
    done = run_script(moto_port, "bootstrap", env=env)
    assert done.returncode == 2
    assert "LANDER_ARCHIVE must be s3://" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_smoke_fails_with_a_reason_then_passes_once_landed_and_owned(moto_port: int) -> None:
    boot = run_script(moto_port, "bootstrap", "--shards", "3")
    assert boot.returncode == 0, boot.stderr

    started = time.monotonic()
    failed = run_script(moto_port, "smoke", "--timeout", "1")
    assert failed.returncode == 1
    line = failed.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("smoke failed after 1s:")
    assert f"nothing landed under s3://{BUCKET}/{PREFIX}/stream={STREAM}/" in line
    assert f"3 of 3 open shards have no owner in {TABLE}" in line
    assert time.monotonic() - started < 60

    # Without the table (deleted by hand), smoke says so.
    dynamodb = client("dynamodb", moto_port)
    dynamodb.delete_table(TableName=TABLE)
    missing = run_script(moto_port, "smoke", "--timeout", "1")
    assert missing.returncode == 1
    assert f"lease table {TABLE} does not exist" in missing.stderr
    assert run_script(moto_port, "bootstrap", "--shards", "3").returncode == 0

    # What the workers would have done: an owner per open shard...
    shards = [
        s["ShardId"] for s in client("kinesis", moto_port).list_shards(StreamName=STREAM)["Shards"]
    ]
    for number, shard in enumerate(shards[:-1]):
        dynamodb.put_item(
            TableName=TABLE,
            Item={
                "leaseKey": {"S": shard},
                "leaseOwner": {"S": f"worker-{number}"},
                "leaseCounter": {"N": "1"},
            },
        )
    # ... the last one released ("NULL" is KCL's no-owner), so still unowned.
    dynamodb.put_item(
        TableName=TABLE,
        Item={
            "leaseKey": {"S": shards[-1]},
            "leaseOwner": {"S": "NULL"},
            "leaseCounter": {"N": "2"},
        },
    )
    partial = run_script(moto_port, "smoke", "--timeout", "1")
    assert partial.returncode == 1
    assert f"1 of 3 open shards have no owner in {TABLE}: {shards[-1]}" in partial.stderr
    assert "nothing landed" in partial.stderr

    dynamodb.update_item(
        TableName=TABLE,
        Key={"leaseKey": {"S": shards[-1]}},
        UpdateExpression="SET leaseOwner = :me",
        ExpressionAttributeValues={":me": {"S": "worker-2"}},
    )
    # ... and one landed object under the stream's prefix.
    client("s3", moto_port).put_object(
        Bucket=BUCKET,
        Key=f"{PREFIX}/stream={STREAM}/dt=2026-11-21/hour=10/minute=05/shard={shards[0]}/1-2.jsonl.gz",
        Body=b"\x1f\x8b",
    )
    passed = run_script(moto_port, "smoke", "--timeout", "10")
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.startswith("smoke ok after"), passed.stdout
    assert len(passed.stdout.strip().splitlines()) == 1
