"""The embedded local AWS stack behaves as the lander's tests need it to."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from consumer.cli.emulators import REGION, LocalStack, LocalStackError
from consumer.cli.emulators import stack as stack_module
from consumer.cli.harness import wait_stream_active

pytestmark = pytest.mark.emulator


def _client(service: str, endpoint: str, **config: Any) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, **config),
    )


@pytest.fixture
def kinesis(local_stack: LocalStack) -> Any:
    return _client("kinesis", local_stack.kinesis_endpoint)


@pytest.fixture
def dynamodb(local_stack: LocalStack) -> Any:
    return _client("dynamodb", local_stack.dynamodb_endpoint, max_pool_connections=32)


@pytest.fixture
def s3(local_stack: LocalStack) -> Any:
    return _client("s3", local_stack.s3_endpoint)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def _pid_alive(pid: int) -> bool:
    # A zombie (exited, not yet reaped by whoever adopted it) counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_endpoints_are_on_loopback_and_exported(local_stack: LocalStack) -> None:
    """Every endpoint is http://127.0.0.1:<ephemeral port>, and env()/export_lines() carry them."""
    endpoints = [local_stack.kinesis_endpoint, local_stack.dynamodb_endpoint]
    endpoints.append(local_stack.s3_endpoint)
    for url in endpoints:
        parts = urlsplit(url)
        assert parts.scheme == "http"
        assert parts.hostname == "127.0.0.1"
        assert parts.port is not None
        assert parts.port not in (4567, 5000)  # the emulators' fixed defaults
    env = local_stack.env()
    assert env["AWS_ENDPOINT_URL_KINESIS"] == local_stack.kinesis_endpoint
    assert env["AWS_ENDPOINT_URL_DYNAMODB"] == local_stack.dynamodb_endpoint
    assert env["AWS_ENDPOINT_URL_S3"] == local_stack.s3_endpoint
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert env["AWS_ACCESS_KEY_ID"]
    assert env["AWS_SECRET_ACCESS_KEY"]
    assert local_stack.export_lines() == [f"export {k}={v}" for k, v in env.items()]


def test_kinesis_sequence_numbers_are_long_and_increase_as_integers(kinesis: Any) -> None:
    """kinesalite gives >= 50-digit decimal sequence numbers that increase within a shard."""
    stream = _name("seq")
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    wait_stream_active(kinesis, stream)

    by_shard: dict[str, list[str]] = {}
    for i in range(40):
        put = kinesis.put_record(StreamName=stream, Data=b"r%d" % i, PartitionKey=f"key-{i}")
        by_shard.setdefault(put["ShardId"], []).append(put["SequenceNumber"])

    assert len(by_shard) == 2, "40 partition keys should reach both shards"
    for sequence_numbers in by_shard.values():
        assert all(s.isdigit() and len(s) >= 50 for s in sequence_numbers)
        as_ints = [int(s) for s in sequence_numbers]
        assert as_ints == sorted(as_ints)
        assert len(set(as_ints)) == len(as_ints)


def test_kinesis_split_and_merge_record_parents_and_closed_shards_end(kinesis: Any) -> None:
    """Split then merge: ListShards names parents, new puts avoid the closed parent, and
    reading a closed shard to its end yields a page without NextShardIterator."""
    stream = _name("reshard")
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    wait_stream_active(kinesis, stream)
    parent = kinesis.list_shards(StreamName=stream)["Shards"][0]
    parent_id = parent["ShardId"]
    low = int(parent["HashKeyRange"]["StartingHashKey"])
    high = int(parent["HashKeyRange"]["EndingHashKey"])
    before = [
        kinesis.put_record(
            StreamName=stream, Data=b"b%d" % i, PartitionKey="k", ExplicitHashKey=str(low)
        )["SequenceNumber"]
        for i in range(5)
    ]

    kinesis.split_shard(
        StreamName=stream, ShardToSplit=parent_id, NewStartingHashKey=str((low + high) // 2 + 1)
    )
    wait_stream_active(kinesis, stream)  # kinesalite refuses the merge while the stream is UPDATING
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    children = [s for s in shards if s.get("ParentShardId") == parent_id]
    assert len(children) == 2
    after_split = kinesis.put_record(
        StreamName=stream, Data=b"a", PartitionKey="k", ExplicitHashKey=str(low)
    )
    assert after_split["ShardId"] in {c["ShardId"] for c in children}

    kinesis.merge_shards(
        StreamName=stream,
        ShardToMerge=children[0]["ShardId"],
        AdjacentShardToMerge=children[1]["ShardId"],
    )
    wait_stream_active(kinesis, stream)
    shards = {s["ShardId"]: s for s in kinesis.list_shards(StreamName=stream)["Shards"]}
    merged = [s for s in shards.values() if "AdjacentParentShardId" in s]
    assert len(merged) == 1
    assert {merged[0]["ParentShardId"], merged[0]["AdjacentParentShardId"]} == {
        c["ShardId"] for c in children
    }
    assert "EndingSequenceNumber" in shards[parent_id]["SequenceNumberRange"]

    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId=parent_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    read: list[str] = []
    for _ in range(20):
        page = kinesis.get_records(ShardIterator=iterator)
        read += [r["SequenceNumber"] for r in page["Records"]]
        if "NextShardIterator" not in page:
            break
        iterator = page["NextShardIterator"]
    else:
        pytest.fail("the closed shard never ended")
    assert read == before


def test_dynamodb_conditional_update_has_exactly_one_winner_per_round(dynamodb: Any) -> None:
    """16 threads racing the same conditional UpdateItem: exactly one wins, 30 rounds running."""
    table = _name("race")
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"leaseKey": {"S": "shardId-000000000000"}}
    dynamodb.put_item(TableName=table, Item={**key, "leaseCounter": {"N": "0"}})
    workers, rounds = 16, 30
    barrier = threading.Barrier(workers)

    def attempt(counter: int) -> str:
        barrier.wait()  # release all workers at once to maximise the overlap
        try:
            dynamodb.update_item(
                TableName=table,
                Key=key,
                ConditionExpression="leaseCounter = :c",
                UpdateExpression="SET leaseCounter = :c + :one",
                ExpressionAttributeValues={":c": {"N": str(counter)}, ":one": {"N": "1"}},
            )
        except ClientError as exc:
            return str(exc.response["Error"]["Code"])
        return "won"

    with ThreadPoolExecutor(workers) as pool:
        for counter in range(rounds):
            outcomes = sorted(pool.map(attempt, [counter] * workers))
            assert outcomes == ["ConditionalCheckFailedException"] * (workers - 1) + ["won"], (
                f"round {counter}: {outcomes}"
            )

    item = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["leaseCounter"] == {"N": str(rounds)}


def test_s3_if_none_match_rejects_the_second_put(s3: Any) -> None:
    """put_object with IfNoneMatch='*' creates once; the second attempt gets 412."""
    bucket = _name("land")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k.jsonl.gz", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="k.jsonl.gz", Body=b"second", IfNoneMatch="*")
    assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=bucket, Key="k.jsonl.gz")["Body"].read() == b"first"


@pytest.mark.processes  # a stack of its own
def test_stop_kills_exactly_its_children_and_is_idempotent() -> None:
    """stop() ends the PIDs the stack started; calling it again is harmless."""
    stack = LocalStack().start()
    pids = stack.pids
    assert set(pids) == {"kinesalite", "moto"}
    assert all(_pid_alive(pid) for pid in pids.values())
    stack.stop()
    assert stack.pids == {}
    assert not any(_pid_alive(pid) for pid in pids.values())
    stack.stop()
    with pytest.raises(LocalStackError):
        _ = stack.kinesis_endpoint


def test_missing_node_modules_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without node_modules, start() fails fast and names `make emulators`."""
    monkeypatch.setattr(stack_module, "NODE_MODULES", tmp_path / "node_modules")
    with pytest.raises(LocalStackError, match="make emulators"):
        LocalStack().start()


@pytest.mark.processes  # a stack of its own
def test_child_failing_to_start_reports_its_stderr() -> None:
    """A child that exits during start-up raises an error carrying its stderr tail,
    and nothing is left running."""
    stack = LocalStack(kinesalite_options={"shardLimit": -1})
    with pytest.raises(LocalStackError, match=r"bad --shardLimit") as caught:
        stack.start()
    assert "kinesalite" in str(caught.value)
    assert stack.pids == {}


@pytest.mark.processes  # a stack of its own
def test_run_local_stack_prints_exports_and_stops_on_sigterm() -> None:
    """`lander local-stack`'s entry prints export lines, serves, and exits 0 on SIGTERM."""
    code = "from consumer.cli.emulators import run_local_stack; raise SystemExit(run_local_stack())"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("# local stack running"):
            line = proc.stdout.readline()
            assert line, f"exited early with {proc.wait()}: {lines}"
            lines.append(line.rstrip("\n"))
        env = dict(line.removeprefix("export ").split("=", 1) for line in lines[:-1])
        assert set(env) >= {"AWS_ENDPOINT_URL_KINESIS", "AWS_ENDPOINT_URL_S3", "AWS_REGION"}
        _client("kinesis", env["AWS_ENDPOINT_URL_KINESIS"]).list_streams()

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    port = urlsplit(env["AWS_ENDPOINT_URL_KINESIS"]).port
    assert port is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_the_moto_child_finds_the_project_root_not_the_package_folder() -> None:
    """Its PYTHONPATH starts at the folder holding ``consumer``. The package folder
    itself made its modules top-level ones: a ``consumer/responses.py`` hid the
    ``responses`` library moto imports, and moto would not start."""
    first = Path(stack_module.LocalStack._moto_env()["PYTHONPATH"].split(os.pathsep)[0])
    assert (first / "consumer" / "__init__.py").is_file()
    assert (first / "pyproject.toml").is_file()
