"""The faults operators make, with real worker processes on the emulators: each is
refused at start with one line, or contained at run time without stalling the fleet.

- a start-up check per dependency (stream, Kinesis and DynamoDB reachable, lease table,
  archive, processor), each exiting non-zero with its line and no traceback;
- a worker whose bucket disappears after it started joins a healthy fleet of two:
  it gives back what it took, is not ready, and every record lands once;
- a second process under one worker id is refused; a stream deleted under a running
  worker stops it with one line.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from consumer.cli.emulators import LocalStack
from consumer.cli.harness import wait_until
from consumer.errors import EXIT_FAILED
from tests.support.cli import EXIT_REFUSED
from tests.support.cli import one_line as _one_line
from tests.support.cli import run_lander as _lander
from tests.support.cluster import FAST, REPO, Cluster

pytestmark = [pytest.mark.emulator, pytest.mark.processes]

FAILOVER = float(FAST["LANDER_FAILOVER_SECONDS"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def other_stack() -> Iterator[LocalStack]:
    """A second local stack, for a worker whose S3 is not the fleet's."""
    with LocalStack() as stack:
        yield stack


@pytest.fixture
def base_env(aws_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A runnable worker environment: stream, table and archive that all exist."""
    import boto3

    stream = f"pre-{uuid.uuid4().hex[:8]}"
    kinesis = boto3.client("kinesis", endpoint_url=aws_env["AWS_ENDPOINT_URL_KINESIS"])
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100}
    )
    return {
        "PATH": str(Path(sys.executable).parent),
        **aws_env,
        "LANDER_STREAM": stream,
        "LANDER_LEASE_TABLE": f"{stream}-leases",
        "LANDER_ARCHIVE": (tmp_path / "archive").as_uri(),
        "LANDER_LOG_FORMAT": "json",
    }


def test_a_healthy_setup_passes_the_checks(base_env: dict[str, str]) -> None:
    """`lander run --check` runs every start-up check, prints what it found and what
    start-up would create or change in the lease table, changes nothing, exits 0."""
    import boto3

    table = base_env["LANDER_LEASE_TABLE"]
    dynamodb = boto3.client("dynamodb", endpoint_url=base_env["AWS_ENDPOINT_URL_DYNAMODB"])
    done = _lander(base_env, "run", "--check")
    assert done.returncode == 0, done.stderr
    assert "start-up checks passed: stream pre-" in done.stdout
    assert "(1 shards)" in done.stdout
    assert (
        f"start-up would create the lease table {table} (on-demand, with "
        "LeaseOwnerToLeaseKeyIndex)" in done.stdout
    )
    stream = base_env["LANDER_STREAM"]
    assert re.search(rf"^lander: {stream}: landing [0-9a-f]{{12}} \(file:///", done.stdout, re.M)
    assert f" and record the landing of stream {stream}\n" in done.stdout
    assert table not in dynamodb.list_tables()["TableNames"]

    # A table KCL 2.x made (no owner index): the index is what start-up would add.
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    done = _lander(base_env, "run", "--check")
    assert done.returncode == 0, done.stderr
    assert f"lease table {table} (0 leases)" in done.stdout
    assert (
        "start-up would add the index LeaseOwnerToLeaseKeyIndex to the lease table "
        f"{table} (UpdateTable) and create the workers table {table}-workers (on-demand) "
        f"and record the landing of stream {stream}\n"
    ) in done.stdout
    assert not dynamodb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"LANDER_STREAM": "no-such-stream"}, r"Kinesis stream no-such-stream does not exist"),
        (
            {"AWS_ENDPOINT_URL_KINESIS": "http://127.0.0.1:{port}"},
            r"cannot reach Kinesis at http://127.0.0.1:\d+",
        ),
        (
            {"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:{port}"},
            r"cannot reach DynamoDB at http://127.0.0.1:\d+",
        ),
        (
            {"LANDER_LEASE_TABLE_CREATE": "false", "LANDER_LEASE_TABLE": "never-created"},
            r"lease table never-created \(or its workers table never-created-workers\) does "
            r"not exist .* LANDER_LEASE_TABLE_CREATE is false",
        ),
        (
            {"LANDER_ARCHIVE": "s3://no-such-bucket-here/landed"},
            r"cannot land in the archive s3://no-such-bucket-here/landed: NoSuchBucket",
        ),
        (
            {"LANDER_ARCHIVE": "file:///{tmp}/a-file/archive"},
            r"cannot land in the archive file:///.*a-file/archive: .*Not a directory",
        ),
    ],
    ids=["no-stream", "kinesis-down", "dynamodb-down", "no-table", "no-bucket", "bad-folder"],
)
def test_each_failed_check_stops_start_up_with_one_line(
    base_env: dict[str, str], tmp_path: Path, change: dict[str, str], expected: str
) -> None:
    """`lander run` itself (not only --check) refuses to start: one line naming the
    service or resource (and the endpoint), no traceback, nothing left running; exit 3,
    or 1 for an endpoint that does not answer (docs/operations.md#exit-codes)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("where the archive's folder should be")
    port = _free_port()
    env = {
        **base_env,
        **{k: v.format(port=port, tmp=str(tmp_path).lstrip("/")) for k, v in change.items()},
    }
    done = _lander(env, "run")
    down = any(k.startswith("AWS_ENDPOINT_URL") for k in change)
    assert done.returncode == (EXIT_FAILED if down else EXIT_REFUSED), done.stderr
    assert re.search(expected, _one_line(done)), done.stderr


def test_a_processor_that_does_not_import_is_a_configuration_error(
    base_env: dict[str, str],
) -> None:
    """A LANDER_PROCESSOR module that is not found: exit 2, one line naming the
    setting and where modules are looked for."""
    done = _lander({**base_env, "LANDER_PROCESSOR": "nosuch.module:Processor"}, "run")
    assert done.returncode == 2, done.stderr
    line = _one_line(done)
    assert "LANDER_PROCESSOR nosuch.module:Processor" in line
    assert "current directory" in line


def test_the_readme_processor_example_works_as_written(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    """The README's PrintProcessor, saved as mypackage/processors.py, is found by
    `lander run --processor mypackage.processors:PrintProcessor` run from that folder."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    example = next(block for block in blocks if "class PrintProcessor" in block)
    flags = re.search(r"lander run (--processor \S+)", readme)
    assert flags is not None
    package = tmp_path / "app" / "mypackage"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "processors.py").write_text(example)
    env = {key: value for key, value in base_env.items() if key != "LANDER_ARCHIVE"}
    done = _lander(env, "run", "--check", *flags.group(1).split(), cwd=tmp_path / "app")
    assert done.returncode == 0, done.stderr
    assert "processor mypackage.processors:PrintProcessor" in done.stdout


@pytest.mark.deep  # 13-20 s of real failover and probing
def test_a_worker_that_cannot_land_gives_back_and_the_fleet_lands_everything(
    make_cluster: Callable[..., Cluster], other_stack: LocalStack
) -> None:
    """A worker whose bucket is deleted right after its start-up checks joins a
    healthy fleet of two: it takes a shard, fails to land, gives it back and is not
    ready; every record lands exactly once within failover + 30 s of the last put."""
    import boto3

    cluster = make_cluster(4, LANDER_FLUSH_SECONDS="1")
    cluster.with_archive()
    cluster.start("w1")
    cluster.start("w2")
    wait_until(lambda: sorted(cluster.owners().values()) == [2, 2], 40, "2/2 ownership")
    # The bad worker lands as the fleet does (the same archive: a worker that lands
    # otherwise is refused at start), but its S3 is another emulator, whose bucket of
    # that name the test deletes.
    other = other_stack
    with cluster.producing(rate=100):
        doomed = boto3.client(
            "s3",
            endpoint_url=other.s3_endpoint,
            region_name=cluster.env["AWS_REGION"],
            aws_access_key_id=cluster.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=cluster.env["AWS_SECRET_ACCESS_KEY"],
        )
        doomed.create_bucket(Bucket=cluster.bucket)
        port = _free_port()
        time.sleep(1)
        cluster.start("bad", AWS_ENDPOINT_URL_S3=other.s3_endpoint, LANDER_METRICS_PORT=str(port))
        wait_until(lambda: "start-up checks passed" in cluster.log_text("bad"), 30, "bad's checks")
        # The bucket disappears after the checks passed, before anything could land.
        for item in doomed.list_objects_v2(Bucket=cluster.bucket).get("Contents", []):
            doomed.delete_object(Bucket=cluster.bucket, Key=item["Key"])
        doomed.delete_bucket(Bucket=cluster.bucket)
        wait_until(
            lambda: "this worker cannot land" in cluster.log_text("bad"), 60, "bad to give up"
        )
        time.sleep(2)
    last_put = time.monotonic()
    ids = cluster.wait_all_archived(timeout=FAILOVER + 30)
    took = time.monotonic() - last_put
    print(f"every record landed {took:.1f} s after the last put (bound {FAILOVER + 30:.0f} s)")
    assert took <= FAILOVER + 30
    assert all(ids[i] == 1 for i in cluster.produced), [i for i in cluster.produced if ids[i] != 1]
    assert "bad" not in cluster.owners()
    status, body = _get(port, "/readyz")
    assert status == 503
    assert body["can_land"] is False
    assert "NoSuchBucket" in str(body["cannot_land"])
    assert "lease taken" in cluster.log_text("bad"), "the bad worker never took a shard"
    assert cluster.procs["bad"].poll() is None, "an unfit worker keeps running and probing"
    codes = cluster.stop_all()
    assert codes["w1"] == 0, codes
    assert codes["w2"] == 0, codes


def test_a_second_process_under_one_worker_id_is_refused(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Two processes with one LANDER_WORKER_ID: the second exits 3 with one line naming
    the id; the first keeps its leases and keeps processing."""
    cluster = make_cluster(2)
    cluster.start("w1")
    wait_until(lambda: cluster.owners().get("w1") == 2, 30, "w1 to own both shards")
    cluster.start("w1-again", LANDER_WORKER_ID="w1")
    code = cluster.procs["w1-again"].wait(FAILOVER + 20)
    assert code == EXIT_REFUSED
    log = cluster.log_text("w1-again")
    assert "another process is running as worker id 'w1'" in log
    assert "Traceback" not in log
    assert cluster.owners() == {"w1": 2}
    cluster.produce(20)
    cluster.wait_all_delivered(30)
    assert cluster.stop_all()["w1"] == 0


def test_a_stream_deleted_under_a_running_worker_stops_it(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The stream goes away: the worker stops with one line and exit 3, instead of
    warning forever."""
    cluster = make_cluster(1)
    cluster.start("w1")
    wait_until(lambda: cluster.owners().get("w1") == 1, 30, "w1 to own the shard")
    cluster.kinesis.delete_stream(StreamName=cluster.stream)
    code = cluster.procs["w1"].wait(40)
    assert code == EXIT_REFUSED
    assert f"Kinesis stream {cluster.stream} does not exist any more" in cluster.log_text("w1")
