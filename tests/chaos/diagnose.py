"""What a failed chaos run looked like at its end, for CI's log: which shards' records
are missing, the lease table, and each worker's last warnings and lease events.

A chaos failure is rare and timing-bound, and replaying its seed seldom repeats it,
so the report has to carry what a diagnosis needs; the worker logs stay on the CI
machine.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Set
from pathlib import Path
from typing import Any

from consumer.leases.board_item import KEY, leadership_from_item, slot_from_item, worker_of
from consumer.leases.dynamo import lease_from_item
from tests.chaos.streams import At

LOG_LINES = 12
"""Lines kept per worker log: its last warnings and errors, then its last lease events."""
LEASE_EVENTS = (
    "lease taken",
    "lease lost",
    "lease released",
    "lease given",
    "lease created",
    "shard processing",
    "shard ended",
    "shard stopped",
    "leading",
    "no longer leading",
    "handing lease off",
    "lease handed off",
)


def missing_by_shard(missing: Set[At]) -> list[str]:
    """One line per (stream, shard) with records missing: how many, from which sequence."""
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], int] = {}
    for stream, shard, sequence, _ in missing:
        place = (stream, shard)
        counts[place] += 1
        first[place] = min(first.get(place, int(sequence)), int(sequence))
    return [
        f"{stream}/{shard}: {n:,} missing from sequence {first[(stream, shard)]}"
        for (stream, shard), n in sorted(counts.items())
    ]


def lease_lines(items: Iterable[dict[str, Any]]) -> list[str]:
    """One line per lease item (key, owner, counter, checkpoint, parents, hand-off,
    report) or workers-table item (a worker's slot, or the leader item)."""
    lines = []
    for item in sorted(items, key=lambda i: str(i.get("leaseKey", i.get(KEY, {}))["S"])):
        if KEY in item:
            worker = worker_of(item)
            if worker is None:
                leadership = leadership_from_item(item)
                lines.append(
                    f"leader {leadership.leader}: counter={leadership.counter} "
                    f"deputy={leadership.deputy}"
                )
                continue
            slot = slot_from_item(item)
            lines.append(
                f"slot {worker}: counter={slot.counter} joined={slot.joined} "
                f"fenced={slot.fenced} leaving={slot.leaving} held={slot.held} "
                f"incoming={list(slot.incoming)}"
            )
            continue
        try:
            lease = lease_from_item(item)
        except (KeyError, ValueError) as exc:  # an item of another kind
            lines.append(f"{item['leaseKey']['S']}: not a lease ({exc!r})")
            continue
        parts = [
            f"owner={lease.owner}",
            f"counter={lease.counter}",
            f"checkpoint={lease.checkpoint}",
        ]
        if lease.parents:
            parts.append(f"parents={sorted(lease.parents)}")
        if lease.handoff_to:
            parts.append(f"handoff_to={lease.handoff_to} ack={lease.handoff_ack}")
        if lease.report is not None:
            parts.append(
                f"pending={lease.report.pending} failures={lease.report.failures} "
                f"last_error={(lease.report.last_error or '')[:120]!r}"
            )
        lines.append(f"{lease.key}: " + " ".join(parts))
    return lines


def log_tail(path: Path, keep: int = LOG_LINES) -> list[str]:
    """A worker log's last warnings and errors and its last lease events, shortened."""
    try:
        raw = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return [f"(no log: {exc})"]
    loud: list[str] = []
    leases: list[str] = []
    for line in raw:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        event = str(entry.get("event", ""))
        shown = " ".join(
            f"{k}={str(v)[:160]}"
            for k, v in entry.items()
            if k not in ("event", "level", "exception", "worker_id")
        )
        text = f"{entry.get('level', '?')} {event}: {shown}"
        if entry.get("level") in ("warning", "error", "critical"):
            loud.append(text)
        elif event.startswith(LEASE_EVENTS):
            leases.append(text)
    return [*loud[-keep:], *leases[-keep:]]
