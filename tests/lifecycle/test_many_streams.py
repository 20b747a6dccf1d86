"""One fleet, one lease table, several streams (LANDER_STREAMS), as worker processes on
the local stack: every record of every stream lands exactly once, a stream created
mid-run is picked up, one deleted mid-run is retired without stopping a worker, one
stream lands where LANDER_STREAMS_FILE says, and the leases are keyed as KCL's
multi-stream mode keys them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consumer.cli.emulators import LocalStack
from consumer.cli.harness import wait_stream_active, wait_until
from tests.support.cli import EXIT_REFUSED, one_line, run_lander
from tests.support.cluster import Cluster

pytestmark = pytest.mark.emulator


def _produce(cluster: Cluster, stream: str, count: int, tag: str) -> list[str]:
    """Put ``count`` records with ids ``tag-n`` into ``stream``."""
    ids = [f"{tag}-{n}" for n in range(count)]
    for start in range(0, count, 100):
        entries = [
            {"Data": json.dumps({"id": i}).encode(), "PartitionKey": uuid.uuid4().hex}
            for i in ids[start : start + 100]
        ]
        while entries:
            out = cluster.kinesis.put_records(StreamName=stream, Records=entries)
            entries = [e for e, r in zip(entries, out["Records"], strict=True) if "ErrorCode" in r]
    cluster.produced.extend(ids)
    return ids


def _landed(cluster: Cluster) -> list[dict[str, Any]]:
    landed, dead = cluster.archive_lines()
    assert dead == []
    return landed


def _ids(lines: list[dict[str, Any]]) -> Counter[str]:
    return Counter(line["data"]["id"] for line in lines)


def _create(cluster: Cluster, name: str, shards: int) -> None:
    cluster.kinesis.create_stream(StreamName=name, ShardCount=shards)
    wait_stream_active(cluster.kinesis, name)


@pytest.mark.deep  # ~20 s; the fast tier reads many streams in the efo test below
def test_three_streams_on_three_workers_exactly_once_with_one_created_and_one_deleted(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    prefix = f"ms-{uuid.uuid4().hex[:8]}"
    cluster = make_cluster(2)  # its own stream is not one of the fleet's
    cluster.with_archive()
    a, b, c, d = (f"{prefix}-{x}" for x in "abcd")
    _create(cluster, a, 2)
    _create(cluster, b, 1)
    _create(cluster, c, 1)
    settings = tmp_path / "streams.toml"
    settings.write_text(f'[streams."{b}"]\narchive = "s3://{cluster.bucket}/other"\n')
    fleet = {
        "LANDER_STREAM": "",
        "LANDER_STREAMS": f"{prefix}-*",
        "LANDER_STREAMS_FILE": str(settings),
        "LANDER_STREAMS_SYNC_SECONDS": "1",
        "LANDER_FLUSH_SECONDS": "1",
    }
    for name in ("w1", "w2", "w3"):
        cluster.start(name, **fleet)
    expected = {
        a: _produce(cluster, a, 300, "a"),
        b: _produce(cluster, b, 200, "b"),
        c: _produce(cluster, c, 100, "c"),
    }
    wait_until(lambda: all(_ids(_landed(cluster))[i] for i in expected[c]), 60, "stream c landed")
    cluster.kinesis.delete_stream(StreamName=c)
    _create(cluster, d, 2)
    expected[d] = _produce(cluster, d, 200, "d")
    expected[a] += _produce(cluster, a, 100, "a2")

    def all_landed() -> list[dict[str, Any]] | None:
        lines = _landed(cluster)
        counts = _ids(lines)
        return lines if all(counts[i] for ids in expected.values() for i in ids) else None

    wait_until(all_landed, 90, "every record of every stream landed", step=0.5)
    workers = ("w1", "w2", "w3")
    wait_until(
        lambda: all("stream retired" in cluster.log_text(name) for name in workers),
        30,
        "every worker retired the deleted stream",
        step=0.5,
    )
    assert all(p.poll() is None for p in cluster.procs.values()), "a worker exited"
    env = {**os.environ, **cluster.env, "LANDER_LEASE_TABLE": cluster.table, **fleet}
    status = run_lander(env, "status", "--json")
    assert status.returncode == 0, status.stderr
    document = json.loads(status.stdout)
    shown = {group["stream"]: group for group in document["streams"]}
    assert {a, b, d} <= set(shown)
    assert len(shown[a]["shards"]) == 2
    assert all(row["shard"].startswith("shardId-") for row in shown[a]["shards"])
    assert {row["owner"] for g in (a, b, d) for row in shown[g]["shards"]} <= {"w1", "w2", "w3"}
    exits = cluster.stop_all()
    assert set(exits.values()) == {0}
    lines = _landed(cluster)
    counts = _ids(lines)
    assert {i: n for i, n in counts.items() if n != 1} == {}, "a record landed twice"
    for stream, ids in expected.items():
        assert {line["data"]["id"] for line in lines if line["stream"] == stream} == set(ids)
    # LANDER_STREAMS_FILE gave stream b an archive of its own.
    prefixes = {key.split("/stream=")[0] for key in cluster.archive_keys() if f"={b}/" in key}
    assert prefixes == {"other"}
    logs = "".join(cluster.log_text(name) for name in workers)
    assert c in logs
    assert "stream added" in logs

    items = cluster.dynamodb.scan(TableName=cluster.table, ConsistentRead=True)["Items"]
    leases = [i for i in items if not i["leaseKey"]["S"].startswith("lander-")]
    summary = {
        name: cluster.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        for name in (a, b, d)
    }
    for name, s in summary.items():
        account = s["StreamARN"].split(":")[4]
        epoch = int(s["StreamCreationTimestamp"].timestamp())
        stream_id = f"{account}:{name}:{epoch}"
        mine = [i for i in leases if i["streamName"]["S"] == stream_id]
        assert len(mine) == s["OpenShardCount"]
        assert all(i["leaseKey"]["S"] == f"{stream_id}:{i['shardId']['S']}" for i in mine)
    # The deleted stream's leases stay, unowned, with their checkpoints.
    gone = [i for i in leases if f":{c}:" in i["leaseKey"]["S"]]
    assert gone
    assert all("leaseOwner" not in i or i["leaseOwner"]["S"] == "NULL" for i in gone)


def test_streams_that_do_not_exist_or_a_single_stream_table_are_refused_in_one_line(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(1)
    cluster.with_archive()
    env = {**os.environ, **cluster.env, **cluster.extra_env, "LANDER_LEASE_TABLE": cluster.table}
    missing = run_lander(
        {**env, "LANDER_STREAMS": f"{cluster.stream},nope-{uuid.uuid4().hex[:6]}"}, "run", "--check"
    )
    assert missing.returncode == EXIT_REFUSED
    assert "LANDER_STREAMS names streams that do not exist" in one_line(missing)
    assert "nope-" in one_line(missing)
    single = run_lander({**env, "LANDER_STREAM": cluster.stream}, "run", "--check")
    assert single.returncode == 0, single.stderr
    cluster.dynamodb.create_table(  # --check created nothing
        TableName=cluster.table,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    cluster.dynamodb.put_item(
        TableName=cluster.table,
        Item={"leaseKey": {"S": "shardId-000000000000"}, "leaseCounter": {"N": "0"}},
    )
    mixed = run_lander({**env, "LANDER_STREAMS": cluster.stream}, "run", "--check")
    assert mixed.returncode == EXIT_REFUSED
    assert "holds single-stream leases" in one_line(mixed)


@pytest.mark.processes
def test_efo_reads_every_stream_through_its_own_consumer(
    fanout_stack: LocalStack, tmp_path: Path
) -> None:
    """Enhanced fan-out over several streams, on kinesis-local: each stream gets the
    consumer of the one name registered under its ARN, a stream created mid-run too,
    and every record of every stream lands exactly once; status and `lander efo
    describe` show each stream's consumer."""
    prefix = f"mse-{uuid.uuid4().hex[:8]}"
    cluster = Cluster(fanout_stack.env(), tmp_path / "c", 1)
    cluster.with_archive()
    a, b, c = (f"{prefix}-{x}" for x in "abc")
    _create(cluster, a, 2)
    _create(cluster, b, 1)
    fleet = {
        "LANDER_STREAM": "",
        "LANDER_STREAMS": f"{prefix}-*",
        "LANDER_STREAMS_SYNC_SECONDS": "1",
        "LANDER_FLUSH_SECONDS": "1",
        "LANDER_READ_MODE": "efo",
    }
    try:
        for name in ("w1", "w2"):
            cluster.start(name, **fleet)
        expected = {a: _produce(cluster, a, 200, "a"), b: _produce(cluster, b, 100, "b")}
        _create(cluster, c, 1)
        expected[c] = _produce(cluster, c, 100, "c")

        def all_landed() -> bool:
            counts = _ids(_landed(cluster))
            return all(counts[i] for ids in expected.values() for i in ids)

        wait_until(all_landed, 90, "every record of every stream landed", step=0.5)
        assert all(p.poll() is None for p in cluster.procs.values()), "a worker exited"
        consumer = cluster.table  # LANDER_EFO_CONSUMER's default: the lease table's name
        for stream in (a, b, c):
            arn = cluster.kinesis.describe_stream_summary(StreamName=stream)[
                "StreamDescriptionSummary"
            ]["StreamARN"]
            found = cluster.kinesis.describe_stream_consumer(StreamARN=arn, ConsumerName=consumer)
            assert found["ConsumerDescription"]["ConsumerStatus"] == "ACTIVE"
        env = {**os.environ, **cluster.env, "LANDER_LEASE_TABLE": cluster.table, **fleet}
        status = run_lander(env, "status", "--json")
        assert status.returncode == 0, status.stderr
        modes = {g["stream"]: g["read_mode"] for g in json.loads(status.stdout)["streams"]}
        assert {s: m["status"] for s, m in modes.items()} == dict.fromkeys((a, b, c), "ACTIVE")
        described = run_lander(env, "efo", "describe")
        assert described.returncode == 0, described.stderr
        said = described.stdout.splitlines()
        assert [line.split(":")[0] for line in said] == sorted((a, b, c))
        assert all(f"stream consumer {consumer}: ACTIVE arn:" in line for line in said)
        assert set(cluster.stop_all().values()) == {0}
    finally:
        cluster.stop_all()
    lines = _landed(cluster)
    counts = _ids(lines)
    assert {i: n for i, n in counts.items() if n != 1} == {}, "a record landed twice"
    for stream, ids in expected.items():
        assert {line["data"]["id"] for line in lines if line["stream"] == stream} == set(ids)
