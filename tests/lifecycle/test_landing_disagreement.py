"""Workers that would land a stream otherwise than the fleet, as worker processes on
the local stack (consumer.lifecycle.agreement):

- a worker whose streams file lands one stream under another prefix is refused at
  start with one line and exit 3, `lander run --check` says the same and prints the
  digest that adopting it would take; the fleet lands every record once, where it did;
- the rolling restart that changes the archive on purpose: the new worker adopts its
  landing, the old one gives its shards back and is not ready, and every record lands
  once across the two prefixes.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from consumer.cli.harness import wait_stream_active, wait_until
from tests.support.cli import EXIT_REFUSED, one_line, run_lander
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.emulator, pytest.mark.processes]


def _prefixes(cluster: Cluster, stream: str) -> set[str]:
    """The archive prefixes under which ``stream`` has landed objects."""
    return {key.split("/stream=")[0] for key in cluster.archive_keys() if f"={stream}/" in key}


def test_a_worker_whose_streams_file_lands_a_stream_elsewhere_is_refused(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = make_cluster(1)  # its own stream is not one of the fleet's
    cluster.with_archive()
    prefix = f"ld-{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    for name in (a, b):
        cluster.kinesis.create_stream(StreamName=name, ShardCount=1)
        wait_stream_active(cluster.kinesis, name)
    fleet_file = tmp_path / "fleet.toml"
    fleet_file.write_text(f'[streams."{b}"]\narchive = "s3://{cluster.bucket}/other"\n')
    odd_file = tmp_path / "odd.toml"
    odd_file.write_text(f'[streams."{a}"]\ninitial_position = "TRIM_HORIZON"\n')
    fleet = {
        "LANDER_STREAM": "",
        "LANDER_STREAMS": f"{prefix}-*",
        "LANDER_STREAMS_FILE": str(fleet_file),
        "LANDER_FLUSH_SECONDS": "1",
    }
    cluster.start("w1", **fleet)
    wait_until(lambda: "worker started" in cluster.log_text("w1"), 30, "w1 to start")
    odd = {**fleet, "LANDER_STREAMS_FILE": str(odd_file)}
    env = {**os.environ, **cluster.env, "LANDER_LEASE_TABLE": cluster.table, **cluster.extra_env}

    checked = run_lander({**env, **odd}, "run", "--check")
    assert checked.returncode == EXIT_REFUSED, checked.stderr
    line = one_line(checked)
    assert (
        f"stream {b} lands otherwise in this worker than in the fleet (archive "
        f"s3://{cluster.bucket}/landed here, s3://{cluster.bucket}/other in the fleet); to "
        "change it on purpose, roll out with LANDER_LANDING_ADOPT="
    ) in line
    digest = re.search(r"LANDER_LANDING_ADOPT=([0-9a-f]{12})", line)
    assert digest is not None

    cluster.start("odd", **odd, LANDER_WORKER_ID="odd")
    assert cluster.procs["odd"].wait(60) == EXIT_REFUSED
    log = cluster.log_text("odd")
    assert "Traceback" not in log
    assert f"stream {b} lands otherwise in this worker than in the fleet" in log
    assert "lease taken" not in log

    # Adopting it on purpose is what the check offers (and it writes nothing).
    adopting = run_lander({**env, **odd, "LANDER_LANDING_ADOPT": digest[1]}, "run", "--check")
    assert adopting.returncode == 0, adopting.stderr
    assert f"adopt landing {digest[1]} for stream {b} in place of " in adopting.stdout

    for stream in (a, b):
        entries = [
            {"Data": json.dumps({"id": f"{stream}-{i}"}).encode(), "PartitionKey": str(i)}
            for i in range(50)
        ]
        cluster.kinesis.put_records(StreamName=stream, Records=entries)
        cluster.produced.extend(f"{stream}-{i}" for i in range(50))
    wait_until(lambda: all(cluster.archived_ids()[i] for i in cluster.produced), 60, "all landed")
    assert cluster.stop_all()["w1"] == 0
    ids = cluster.archived_ids()
    assert all(ids[i] == 1 for i in cluster.produced)
    assert _prefixes(cluster, b) == {"other"}
    assert _prefixes(cluster, a) == {"landed"}


@pytest.mark.deep  # ~30 s: two workers, a change adopted mid-stream
def test_a_rolling_restart_that_moves_the_archive(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(2, LANDER_FLUSH_SECONDS="1", LANDER_LANDING_CHECK_SECONDS="1")
    cluster.with_archive()
    port = _free_port()
    cluster.start("old", LANDER_METRICS_PORT=str(port))
    wait_until(lambda: cluster.owners().get("old") == 2, 30, "old to own both shards")
    moved = {"LANDER_ARCHIVE": f"s3://{cluster.bucket}/moved"}
    env = {**os.environ, **cluster.env, "LANDER_LEASE_TABLE": cluster.table, **cluster.extra_env}
    env.update(LANDER_STREAM=cluster.stream, **moved)
    refused = run_lander(env, "run", "--check")
    assert refused.returncode == EXIT_REFUSED, refused.stderr
    digest = re.search(r"LANDER_LANDING_ADOPT=([0-9a-f]{12})", one_line(refused))
    assert digest is not None
    with cluster.producing(rate=100):
        time.sleep(2)
        cluster.start("new", **moved, LANDER_LANDING_ADOPT=digest[1])
        wait_until(lambda: cluster.owners() == {"new": 2}, 40, "new to own both shards")
        time.sleep(2)
    ids = cluster.wait_all_archived(timeout=40)
    assert {i: ids[i] for i in cluster.produced if ids[i] != 1} == {}
    assert _prefixes(cluster, cluster.stream) == {"landed", "moved"}
    log = cluster.log_text("old")
    assert "the fleet lands a stream otherwise than this worker" in log
    assert cluster.procs["old"].poll() is None, "a superseded worker waits to be replaced"
    status, body = _ready(port)
    assert status == 503
    assert body["can_land"] is False
    assert "restart this one with the fleet's settings" in str(body["cannot_land"])
    assert "adopted a new landing for the fleet" in cluster.log_text("new")
    codes = cluster.stop_all()
    assert codes == {"old": 0, "new": 0}, codes


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(port: int) -> tuple[int, dict[str, object]]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return int(reply.status), dict(json.loads(reply.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, dict(json.loads(exc.read()))
