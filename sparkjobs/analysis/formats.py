"""How the analysis report writes numbers, times and durations, and what it sums and
warns about: shared by the HTML page (:mod:`sparkjobs.analysis.page`) and the text
summary (:mod:`sparkjobs.analysis.report`), so both say the same in the same words.

Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from sparkjobs.analysis.findings import Analysis, Lateness, ShardShare

# --- numbers, times and durations as people read them ------------------------------------


def utc(moment: datetime) -> datetime:
    """The same instant in UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def epoch_second(moment: datetime) -> int:
    return int(utc(moment).timestamp())


def count(n: int) -> str:
    return f"{n:,}"


def rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "n/a"


def share(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def size(n: int) -> str:
    if abs(n) < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} PiB"


def duration(ms: float) -> str:
    """850 ms, 3.2 s, 4 min 10 s, 2 h 5 min; negative when clocks disagree."""
    if not math.isfinite(ms):
        return "n/a"
    if ms < 0:
        return "-" + duration(-ms)
    if ms < 999.5:
        return f"{ms:.0f} ms"
    if ms < 59_950:
        return f"{ms / 1000:.1f} s"
    seconds = round(ms / 1000)
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    minutes = round(ms / 60_000)
    return f"{minutes // 60} h {minutes % 60} min"


def plain(text: str) -> str:
    """Text for a terminal: control characters from the data must not drive it."""
    return "".join(c if c.isprintable() else "?" for c in text)


def hour(hour: datetime | None) -> str:
    return "whole window" if hour is None else utc(hour).strftime("%Y-%m-%d %H:%M")


# --- what the page and the summary both sum and say ---------------------------------------


@dataclass(frozen=True, slots=True)
class Totals:
    input_rows: int
    transport: int
    producer: int
    sequence: int
    dead_letters: int
    bad_files: int
    bad_lines: int
    shards: int


def totals(a: Analysis) -> Totals:
    return Totals(
        input_rows=sum(d.input_rows for d in a.duplicates),
        transport=sum(d.transport for d in a.duplicates),
        producer=sum(d.producer for d in a.duplicates),
        sequence=sum(d.sequence for d in a.duplicates),
        dead_letters=sum(d.records for d in a.dead_letters),
        bad_files=len({b.file for b in a.bad_inputs}),
        # Only malformed entries count lines; truncated and corrupt ones are whole files.
        bad_lines=sum(b.count for b in a.bad_inputs if b.kind == "malformed"),
        shards=len(a.shards) or len({p.shard_id for p in a.volume}),
    )


def warnings(a: Analysis, t: Totals) -> list[str]:
    """What a reader must not miss, in plain words."""
    found = []
    if a.remaining_duplicates > 0:
        found.append(f"{a.remaining_duplicates:,} duplicates remain after compaction")
    if a.bad_inputs:
        found.append(f"bad input: {t.bad_files:,} files, {t.bad_lines:,} malformed lines")
    if a.dead_letters:
        found.append(f"{t.dead_letters:,} dead letters")
    return found


def lateness_kinds(lateness: list[Lateness]) -> list[str]:
    """Landing first, then event, then anything newer the job may add."""
    order = {"landing": 0, "event": 1}
    return sorted({r.kind for r in lateness}, key=lambda k: (order.get(k, 2), k))


def skew(shards: list[ShardShare]) -> tuple[ShardShare, float, float] | None:
    """The busiest shard, its records over the mean shard's, and that mean."""
    if not shards:
        return None
    mean = sum(s.records for s in shards) / len(shards)
    busiest = max(shards, key=lambda s: (s.records, s.shard_id))
    return (busiest, busiest.records / mean, mean) if mean > 0 else None
