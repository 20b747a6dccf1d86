"""Workers in efo read mode as real OS processes on kinesis-local (the emulator with
SubscribeToShard): they register the stream consumer, share the shards, hand off on
SIGTERM and deliver every record, none to two workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from consumer.cli.emulators import LocalStack
from consumer.cli.harness import wait_until
from tests.lifecycle.test_worker_processes import reshard_parents_before_children
from tests.support.cluster import REPO, Cluster

pytestmark = [pytest.mark.deep, pytest.mark.emulator, pytest.mark.processes]  # ~21 s each


@pytest.fixture
def cluster(fanout_stack: LocalStack, tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(
        fanout_stack.env(),
        tmp_path / "efo",
        2,
        extra_env={"LANDER_READ_MODE": "efo"},
    )
    try:
        yield made
    finally:
        made.stop_all()


def _lander(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **cluster.env,
        "LANDER_STREAM": cluster.stream,
        "LANDER_LEASE_TABLE": cluster.table,
        "LANDER_READ_MODE": "efo",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "consumer.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_efo_workers_share_hand_off_and_deliver_everything_once(cluster: Cluster) -> None:
    with cluster.producing(rate=40):
        cluster.start("w1")
        wait_until(lambda: cluster.owners() == {"w1": 2}, 60, "w1 to own both shards")
        cluster.start("w2")
        wait_until(lambda: sorted(cluster.owners().values()) == [1, 1], 60, "a shard handed to w2")
        wait_until(lambda: any(d.worker == "w2" for d in cluster.deliveries()), 30, "w2 to read")
        cluster.signal("w2", signal.SIGTERM)
        assert cluster.procs["w2"].wait(30) == 0
        wait_until(lambda: cluster.owners() == {"w1": 2}, 60, "w1 to own both shards again")
    cluster.wait_all_delivered(timeout=90)
    described = _lander(cluster, "efo", "describe")
    status = _lander(cluster, "status")
    codes = cluster.stop_all()
    assert all(code == 0 for code in codes.values()), codes
    twice = {pos: ws for pos, ws in cluster.positions_by_worker().items() if len(ws) > 1}
    assert not twice, f"positions delivered to two workers: {list(twice.items())[:5]}"
    assert described.returncode == 0, described.stderr
    assert f"stream consumer {cluster.table}: ACTIVE arn:aws:kinesis:" in described.stdout
    assert status.returncode == 0, status.stderr
    assert f"read mode: efo, stream consumer {cluster.table}: ACTIVE" in status.stdout
    gone = _lander(cluster, "efo", "deregister")
    assert "deregistered" in gone.stdout, gone.stderr


def test_efo_resharding_reads_parents_before_children(cluster: Cluster) -> None:
    """A split and a merge in efo mode on kinesis-local, whose subscriptions to a
    closed shard never end: the quiet-shard check ends the parents, and every child
    is read after them."""
    reshard_parents_before_children(cluster)
