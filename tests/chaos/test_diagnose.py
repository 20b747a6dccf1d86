"""The failed-run diagnosis reads what CI's log will show: missing records by shard,
lease items and workers' slots, and a worker log's loud lines and lease events."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.diagnose import lease_lines, log_tail, missing_by_shard


def test_missing_records_are_counted_by_shard_from_the_first_sequence() -> None:
    missing = {
        ("s", "shardId-1", "100", 0),
        ("s", "shardId-1", "90", 1),
        ("t", "shardId-1", "7", 0),
    }
    assert missing_by_shard(missing) == [
        "s/shardId-1: 2 missing from sequence 90",
        "t/shardId-1: 1 missing from sequence 7",
    ]


def test_lease_items_slots_and_the_leader_item_each_get_a_line() -> None:
    lease = {
        "leaseKey": {"S": "shardId-000000000004"},
        "leaseOwner": {"S": "w2"},
        "leaseCounter": {"N": "7"},
        "checkpoint": {"S": "SHARD_END"},
        "parentShardId": {"SS": ["shardId-000000000000", "shardId-000000000001"]},
    }
    slot = {"itemKey": {"S": "worker/w2"}, "c": {"N": "12"}, "l": {"BOOL": True}}
    leader = {"itemKey": {"S": "leader"}, "w": {"S": "w2"}, "c": {"N": "40"}, "d": {"S": "w1"}}
    lines = lease_lines([lease, slot, leader])
    found = next(line for line in lines if line.startswith("slot w2"))
    assert "counter=12" in found
    assert "leaving=True" in found
    assert "leader w2: counter=40 deputy=w1" in lines
    shard = next(line for line in lines if line.startswith("shardId-000000000004"))
    for part in ("owner=w2", "counter=7", "SHARD_END", "shardId-000000000000"):
        assert part in shard


def test_a_log_tail_keeps_warnings_and_lease_events_and_skips_the_rest(tmp_path: Path) -> None:
    entries = [
        {"event": "lease taken", "level": "info", "shard_id": "s1", "worker_id": "w"},
        {"event": "landed", "level": "info", "shard_id": "s1"},
        {"event": "lease lost", "level": "warning", "shard_id": "s1", "exception": "long"},
    ]
    log = tmp_path / "w.log"
    log.write_text("\n".join([*map(json.dumps, entries), "not json", "[1]"]) + "\n")
    tail = log_tail(log)
    assert tail == ["warning lease lost: shard_id=s1", "info lease taken: shard_id=s1"]
    assert log_tail(tmp_path / "none.log")[0].startswith("(no log")
