"""``lander status``: the lease table as a person reads it.

One row per shard, from the lease table and the stream's shard list together:
state, owner, checkpoint, how long ago the lease was last written, and the lag its
owner reported with its last heartbeat. Reading is one Scan and one ListShards; it
never writes, so it is safe to run against a live table as often as you like.

Lease age and "stale" come from the wall-clock stamp workers write for this view
(``lastUpdateMs``); workers themselves never judge expiry by wall clock. Leases are
not renewed, so "stale" comes from the owner's slot in the workers table: fenced,
missing, or its last beat's stamp older than the failover time (for an owner without a
slot, a KCL worker's, from the lease's own stamp). The workers table adds one Scan and
a line per worker (the leader first, then join order; leases, CPU). "Stalled"
comes from the owner's own report with each heartbeat: records wait and the
checkpoint has not moved for ``stall_seconds`` (a duration the owner measured).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from consumer.config import Settings
from consumer.errors import LanderError, exit_code
from consumer.leases.board import Board
from consumer.leases.keys import StreamId, lease_key, split_key, stream_groups
from consumer.leases.model import Lease, wall_ms
from consumer.lifecycle.assembly import survey
from consumer.stream import Shard


@dataclass(frozen=True, slots=True)
class ShardStatus:
    """One line of ``lander status``."""

    shard: str
    state: str
    owner: str | None
    checkpoint: str
    lease_age_s: float | None
    lag_ms: int | None
    parents: tuple[str, ...]
    pending: int | None = None
    """Records the owner holds that no checkpoint covers yet."""
    checkpoint_age_s: float | None = None
    """How long those records have waited without the checkpoint moving."""
    failures: int = 0
    last_error: str | None = None
    kb_per_second: float | None = None
    """The shard's throughput as its owner last measured it (with a checkpoint)."""


STATES = {
    "owned": "an owner holds the lease (its board slot beats; a KCL owner renews it)",
    "stalled": "owned, but records wait and the checkpoint has not moved for the stall time",
    "stale": "the owner has not written the lease (board: not beaten) for longer than the "
    "failover time, or its board slot is fenced or gone",
    "handing-off": "another worker asked for the lease; the owner hands it over",
    "free": "no owner; the leader gives it to a worker",
    "waiting": "its parents are not read to their end yet",
    "finished": "read to its end (SHARD_END checkpointed)",
    "no-lease": "listed by the stream, no lease yet (a worker creates it on its next sync)",
    "gone": "a lease whose shard the stream no longer lists (trimmed)",
}


def shard_rows(
    leases: Iterable[Lease],
    shards: Iterable[Shard],
    *,
    now_ms: int,
    failover_seconds: float,
    stall_seconds: float = 300.0,
    board: Board | None = None,
) -> list[ShardStatus]:
    """Join leases and shards into rows, sorted by shard id (pure)."""
    by_key = {lease.key: lease for lease in leases}
    listed = {shard.shard_id: shard for shard in shards}
    rows = []
    for key in sorted(set(by_key) | set(listed)):
        lease = by_key.get(key)
        shard = listed.get(key)
        if lease is None:
            parents = tuple(sorted(shard.parents)) if shard is not None else ()
            rows.append(ShardStatus(key, "no-lease", None, "-", None, None, parents))
            continue
        age = None if lease.updated_ms is None else max(0, now_ms - lease.updated_ms) / 1000
        state = _state(
            lease, shard, by_key, _owner_age(lease, board, age, now_ms), failover_seconds
        )
        report = lease.report if lease.owner is not None else None
        waited = None if report is None else report.checkpoint_age_ms / 1000
        if state == "owned" and report is not None and report.pending and waited is not None:
            state = "stalled" if waited >= stall_seconds else state
        rows.append(
            ShardStatus(
                shard=key,
                state=state,
                owner=lease.owner,
                checkpoint=str(lease.checkpoint),
                lease_age_s=None if age is None else round(age, 1),
                lag_ms=lease.lag_ms if lease.owner is not None else None,
                parents=tuple(sorted(lease.parents)),
                pending=None if report is None else report.pending,
                checkpoint_age_s=None if waited is None else round(waited, 1),
                failures=0 if report is None else report.failures,
                last_error=None if report is None else report.last_error,
                kb_per_second=None if lease.load is None else lease.load.kb_per_second,
            )
        )
    return rows


def _owner_age(lease: Lease, board: Board | None, age: float | None, now_ms: int) -> float | None:
    """Seconds since the owner last showed it lives: its last beat under board
    coordination (infinite if its slot is fenced or gone), else the lease's last write."""
    if board is None or not board.slots or lease.owner is None:
        return age
    slot = board.slots.get(lease.owner)
    if slot is None or slot.fenced:
        return float("inf")
    if slot.beat_ms is None:
        return None
    return max(0, now_ms - slot.beat_ms) / 1000


def board_lines(board: Board, now_ms: int) -> list[str]:
    """One line per worker: the leader (as the leader item names it) first, then the
    others in join order."""
    lines = []
    leader = None if board.leadership is None else board.leadership.leader
    ordered = sorted(board.slots.items(), key=lambda item: (item[0] != leader, item[1].joined))
    for worker, slot in ordered:
        beat = "-" if slot.beat_ms is None else _duration(max(0, now_ms - slot.beat_ms)) + " ago"
        flags = [
            flag
            for flag, on in (
                ("leader", worker == leader),
                ("cannot land: giving its leases back", slot.unfit),
                ("leaving", slot.leaving and not slot.unfit),
                ("fenced", slot.fenced),
            )
            if on
        ]
        lines.append(
            f"  {worker}: {slot.held} leases, CPU {slot.cpu:.0f}%, last beat {beat}"
            + (f" ({', '.join(flags)})" if flags else "")
        )
    return lines


def _state(
    lease: Lease,
    shard: Shard | None,
    leases: dict[str, Lease],
    age: float | None,
    failover_seconds: float,
) -> str:
    if lease.finished:
        return "finished"
    if shard is None:
        return "gone"
    if lease.owner is None:
        unfinished = [p for p in lease.parents if p in leases and not leases[p].finished]
        return "waiting" if unfinished else "free"
    if lease.handoff_to is not None:
        return "handing-off"
    if age is not None and age > failover_seconds:
        return "stale"
    return "owned"


def render_table(rows: Sequence[ShardStatus], stream: str, table: str) -> str:
    """Aligned columns with a one-line summary underneath."""
    header = ("SHARD", "STATE", "OWNER", "CHECKPOINT", "LEASE AGE", "LAG", "WAITING", "KB/S")
    lines = [header]
    for row in rows:
        lines.append(
            (
                row.shard,
                row.state,
                row.owner or "-",
                row.checkpoint,
                "-" if row.lease_age_s is None else f"{row.lease_age_s:.1f}s",
                "-" if row.lag_ms is None else _duration(row.lag_ms),
                _waiting(row),
                "-" if row.kb_per_second is None else f"{row.kb_per_second:,.1f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    owners = {row.owner for row in rows if row.owner and row.state != "finished"}
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    troubled = [row for row in rows if row.state == "stalled" or row.failures]
    if troubled:
        text.append("")
    for row in troubled:
        waited = _duration(int((row.checkpoint_age_s or 0) * 1000))
        text.append(
            f"{row.shard}: {row.state}, {row.pending or 0:,} records waiting for {waited}, "
            f"{row.failures} failures since the last checkpoint"
            + (f"; last error: {row.last_error}" if row.last_error else "")
        )
    text.append("")
    text.append(
        f"stream {stream}, lease table {table}: {len(rows)} shards ({summary or 'none'}); "
        f"{len(owners)} workers own leases"
    )
    if any(_waiting(row) == UNREPORTED for row in rows):
        text.append(
            f"WAITING {UNREPORTED}: not reported; owners write it for failing or stalled "
            "shards only (every shard's count: lander_records_pending on /metrics)"
        )
    return "\n".join(text)


UNREPORTED = "n/r"
"""WAITING of an owned shard whose owner wrote no report (healthy, under board
coordination): unknown here, not zero."""


def _waiting(row: ShardStatus) -> str:
    if row.pending is not None:
        return f"{row.pending:,}"
    return UNREPORTED if row.state in ("owned", "handing-off") else "-"


def render_json(
    rows: Sequence[ShardStatus],
    stream: str,
    table: str,
    now_ms: int,
    board: Board | None = None,
    *,
    read_mode: dict[str, str | None] | None = None,
) -> str:
    """The same rows as one JSON document (for scripts and ``jq``), with the board's
    workers under board coordination and the read mode (efo: the stream consumer)."""
    document: dict[str, object] = {
        "stream": stream,
        "lease_table": table,
        "generated_at_ms": now_ms,
        "shards": [asdict(row) for row in rows],
    }
    if read_mode is not None:
        document["read_mode"] = read_mode
    if board is not None and board.slots:
        document["workers"] = [
            {"worker": worker, **asdict(slot)}
            for worker, slot in sorted(board.slots.items(), key=lambda item: item[1].joined)
        ]
    return json.dumps(document, indent=2)


def keyed(stream: StreamId | None, shards: Iterable[Shard]) -> list[Shard]:
    """A stream's shards named by their lease keys, to join with its leases."""
    return [
        Shard(
            lease_key(stream, shard.shard_id),
            frozenset(lease_key(stream, p) for p in shard.parents),
            shard.closed,
        )
        for shard in shards
    ]


def by_shard_id(rows: Iterable[ShardStatus]) -> list[ShardStatus]:
    """Rows of one stream named by shard id (the stream heads the group)."""
    return [
        replace(
            row,
            shard=split_key(row.shard)[1],
            parents=tuple(split_key(p)[1] for p in row.parents),
        )
        for row in rows
    ]


def render_streams_json(
    groups: Sequence[tuple[str, str, Sequence[ShardStatus]]],
    table: str,
    now_ms: int,
    board: Board | None = None,
    read_modes: Mapping[str, dict[str, str | None]] | None = None,
) -> str:
    """A multi-stream table as one JSON document: a list of streams (name, stream id,
    read mode as :meth:`consumer.stream.readers.ModeState.as_dict` gives it or null for a
    deleted stream, shards) and the board's workers."""
    document = json.loads(render_json([], "", table, now_ms, board))
    del document["stream"], document["shards"]
    modes = read_modes or {}
    document["streams"] = [
        {
            "stream": name,
            "stream_id": stream_id,
            "read_mode": modes.get(name),
            "shards": [asdict(r) for r in rows],
        }
        for name, stream_id, rows in groups
    ]
    return json.dumps(document, indent=2)


def _duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f}s"
    return f"{ms / 60_000:.1f}min"


async def status_command(settings: Settings, *, as_json: bool) -> int:
    """``lander status``: read the table and the streams once (survey), print them;
    the exit code (a missing stream or table 3, an endpoint that does not answer 1)."""
    try:
        found = await survey(settings)
    except LanderError as exc:  # missing (3), unreachable or unreadable (1)
        print(f"lander: {exc}", file=sys.stderr)
        return exit_code(exc)
    board, groups = found.board, stream_groups(found.leases)
    if not settings.streams:
        groups = {None: groups.get(None, [])}
    now = wall_ms()
    rows = {
        stream_id: shard_rows(
            group,
            keyed(stream_id, found.shards[stream_id]),
            now_ms=now,
            failover_seconds=settings.failover_seconds,
            stall_seconds=settings.stall_seconds,
            board=board,
        )
        for stream_id, group in groups.items()
    }
    table = settings.lease_table
    modes = {name: state.as_dict() for name, state in found.modes.items()}
    if settings.streams:  # one group per stream, shards by shard id
        named = [
            (sid.name if sid else "?", sid.serialized if sid else "", by_shard_id(group))
            for sid, group in rows.items()
        ]
        if as_json:
            print(render_streams_json(named, table, now, board, read_modes=modes))
        else:
            print(f"{len(named)} streams in lease table {table} ({settings.streams})")
            for name, serialized, shards in named:
                print(f"\n== {name} ({serialized})")
                print(render_table(shards, name, table))
                if name in found.modes:
                    print(found.modes[name].line())
    elif as_json:
        mode = modes[settings.stream]
        print(render_json(rows[None], settings.stream, table, now, board, read_mode=mode))
    else:
        print(render_table(rows[None], settings.stream, table))
        print(found.modes[settings.stream].line())
    if not as_json and board.slots:
        print(f"board coordination: {len(board.slots)} workers in the workers table")
        print("\n".join(board_lines(board, now)))
    return 0
