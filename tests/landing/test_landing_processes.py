"""The lander in real worker processes, the archive checked with plain boto3.

Every test ends by reading the whole archive back with boto3, gzip and json (none of
the project's code) and comparing it with what the test produced: every record
exactly once by position, none missing.
"""

from __future__ import annotations

import base64
import json
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from consumer.cli.harness import wait_until
from consumer.stream.kpl import MAGIC
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.emulator, pytest.mark.processes]

FAILOVER = 3.0
LANDING = {"LANDER_FLUSH_SECONDS": "1", "LANDER_MAX_RECORDS_PER_FILE": "40"}


# The efo twins (17-22 s each) are in the deep tier: the fan-out contract tests hold both
# read modes to the same records, and the fast tier reads through fan-out end to end in
# tests/lifecycle/test_many_streams.py.
@pytest.fixture(params=["polling", pytest.param("efo", marks=pytest.mark.deep)])
def make_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., Cluster]]:
    """Clusters landing into a fresh bucket, in each read mode (efo on kinesis-local, in
    the deep tier); every worker is stopped by PID at the end."""
    made: list[Cluster] = []
    if request.param == "efo":
        env: dict[str, str] = request.getfixturevalue("fanout_stack").env()
        extra = {**LANDING, "LANDER_READ_MODE": "efo"}
    else:
        env = request.getfixturevalue("aws_env")
        extra = dict(LANDING)

    def make(shards: int) -> Cluster:
        cluster = Cluster(env, tmp_path / f"c{len(made)}", shards, extra_env=dict(extra))
        cluster.with_archive()
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()


def _assert_exactly_once(cluster: Cluster) -> Counter[tuple[str, str, int]]:
    landed, _ = cluster.archive_lines()
    positions = Counter(
        (line["shard_id"], line["sequence_number"], line["subsequence_number"]) for line in landed
    )
    twice = [pos for pos, n in positions.items() if n > 1]
    assert not twice, f"{len(twice)} positions landed twice, e.g. {twice[:3]}"
    ids = Counter(line["data"]["id"] for line in landed)
    assert set(ids) == set(cluster.produced)
    return positions


def test_crash_between_put_and_checkpoint_then_restart(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A worker dies right after landing an object, before checkpointing it; the next
    owner reconciles and the archive holds every record once."""
    cluster = make_cluster(2)
    cluster.produce(200)
    crasher = cluster.start(
        "crasher",
        LANDER_PROCESSOR="tests.support.faults:CrashAfterPut",
        FAULT_CRASH_AFTER_PUTS="3",
    )
    assert crasher.wait(30) == 137
    # The third put landed; another shard's put may have been in flight too.
    assert len(cluster.archive_keys()) >= 3
    cluster.produce(100)
    cluster.start("w2")
    cluster.wait_all_archived()
    _assert_exactly_once(cluster)
    reconciled = [
        json.loads(line)
        for line in cluster.log_text("w2").splitlines()
        if "reconciled with the archive" in line
    ]
    assert sum(entry["dropped_already_landed"] for entry in reconciled) > 0, reconciled


def test_lease_table_deleted_mid_run_archive_still_once(
    make_cluster: Callable[..., Cluster],
) -> None:
    """With the lease table gone the stream is re-read from TRIM_HORIZON; reconciliation
    keeps every record in the archive once."""
    cluster = make_cluster(2)
    cluster.produce(150)
    cluster.start("w1")
    cluster.start("w2")
    cluster.wait_all_archived()
    objects_before = len(cluster.archive_keys())
    cluster.dynamodb.delete_table(TableName=cluster.table)
    wait_until(lambda: len(cluster.leases()) == 2, 30, "the lease table to be rebuilt")
    try:
        wait_until(
            lambda: all(
                lease["checkpoint"] not in ("TRIM_HORIZON", None)
                for lease in cluster.leases().values()
            ),
            60,  # efo: each lease's new reader may first wait out a live subscription
            "the re-read to be checkpointed past what was landed",
        )
    except AssertionError as exc:
        refused = {
            name: cluster.log_text(name).count("SubscribeToShard failed") for name in cluster.procs
        }
        raise AssertionError(
            f"{exc}; leases {cluster.leases()}; subscribe refusals {refused}"
        ) from None
    assert len(cluster.archive_keys()) == objects_before
    cluster.produce(100)
    cluster.wait_all_archived()
    _assert_exactly_once(cluster)
    assert all(proc.poll() is None for proc in cluster.procs.values())


@pytest.mark.deep  # ~15 s of real failover; the fencing contract tests are in the fast tier
def test_zombie_racing_the_new_owner_adds_no_duplicate(
    make_cluster: Callable[..., Cluster],
) -> None:
    """A lander frozen past the failover time and woken while the new owner lands: no
    record twice in the archive; whatever conflicts it met are counted in its log."""
    cluster = make_cluster(1)
    with cluster.producing(rate=150):
        cluster.start("zombie")
        wait_until(lambda: cluster.owners() == {"zombie": 1}, 30, "zombie to own the shard")
        cluster.start("w2")
        time.sleep(2.0)
        cluster.signal("zombie", signal.SIGSTOP)
        wait_until(lambda: cluster.owners() == {"w2": 1}, FAILOVER + 15, "w2 to take over")
        time.sleep(1.5)
        cluster.signal("zombie", signal.SIGCONT)
        time.sleep(3.0)
    cluster.wait_all_archived()
    _assert_exactly_once(cluster)
    zombie_log = cluster.log_text("zombie")
    assert "lease lost" in zombie_log
    conflicts = zombie_log.count("landed object conflict")
    print(f"zombie conflicts counted: {conflicts}")


def test_bad_payloads_go_to_dead_letters_and_neighbours_land(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Invalid JSON, invalid UTF-8, an empty payload and a corrupt KPL aggregate are
    dead-lettered with their reason; a 1 MiB record and the good neighbours land."""
    cluster = make_cluster(1)
    cluster.produce(5, prefix="before")
    bad = {
        "invalid JSON": b"{not json",
        "invalid UTF-8": b'{"a": "\xff\xfe"}',
        "corrupt aggregate": MAGIC + b"\x0a\x01k\x1a\x05\x08\x00\x1a\x01x" + b"\x00" * 16,
    }
    sequences = {name: cluster.put_raw(data) for name, data in bad.items()}
    big = json.dumps({"id": "big", "pad": "x" * (1024 * 1024 - 200)}).encode()
    cluster.put_raw(big)
    cluster.produced.append("big")
    cluster.produce(5, prefix="after")
    cluster.start("w1")
    cluster.wait_all_archived()
    _assert_exactly_once(cluster)

    def three_dead() -> list[dict[str, str]] | None:
        _, lines = cluster.archive_lines()
        return lines if len(lines) >= 3 else None

    dead = wait_until(three_dead, 30, "three dead letters")
    by_sequence = {line["sequence_number"]: line for line in dead}
    assert by_sequence[sequences["invalid JSON"]]["reason"].startswith("invalid JSON")
    assert by_sequence[sequences["invalid UTF-8"]]["reason"].startswith("not UTF-8")
    assert by_sequence[sequences["corrupt aggregate"]]["reason"].startswith("kpl_")
    restored = base64.b64decode(by_sequence[sequences["invalid UTF-8"]]["data_base64"])
    assert restored == bad["invalid UTF-8"]
    assert len(dead) == 3
