"""The demo's reconciliation: what an independent reader finds in the archive, the
checks that produced, landed and compacted counts agree, and the summary printed.

Pure apart from reading the archive folder (through :mod:`consumer.archive.reader`).
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consumer.archive import reader as archive_reader
from consumer.cli.harness import Say
from consumer.cli.produce import Place, Produced


@dataclass(slots=True)
class ArchiveView:
    """What an independent reader finds in the archive folder."""

    landed: Counter[Place] = field(default_factory=Counter)
    dead: Counter[Place] = field(default_factory=Counter)
    files: int = 0
    dead_files: int = 0
    days: set[str] = field(default_factory=set)

    @property
    def raw_duplicates(self) -> int:
        """Copies beyond the first of any position (the target is zero)."""
        return sum(n - 1 for n in self.landed.values() if n > 1)


def read_archive(root: Path, stream: str) -> ArchiveView:
    """Read every landed and dead-letter object under a file archive (whole files only)."""
    view = ArchiveView()
    for landed in archive_reader.read_archive(root, stream):
        view.files += 1
        view.days.add(f"{landed.key.minute:%Y-%m-%d}")
        for line in landed.lines:
            view.landed[(line.shard_id, line.sequence_number, line.subsequence_number)] += 1
    for path in archive_reader.dead_letter_paths(root, stream):
        view.dead_files += 1
        for letter in archive_reader.read_dead_letters(path):
            view.dead[_position(letter)] += 1
    return view


def _position(line: dict[str, Any]) -> Place:
    return (str(line["shard_id"]), str(line["sequence_number"]), int(line["subsequence_number"]))


@dataclass(slots=True)
class Check:
    """One line of the final reconciliation."""

    what: str
    ok: bool
    detail: str


def reconcile(  # noqa: PLR0917 - one number per argument
    produced: Produced,
    view: ArchiveView,
    transport: int,
    producer_dups: int,
    rows: int,
    distinct: int,
    lost: int,
) -> list[Check]:
    wanted, bad = produced.places(), produced.places(bad=True)
    landed = set(view.landed)
    missing = len(wanted - landed)
    unexpected = len(landed - wanted)
    events = len(produced.event_ids())
    return [
        Check(
            "every produced record landed",
            missing == 0 and unexpected == 0,
            f"{len(wanted):,} produced, {len(landed & wanted):,} landed, "
            f"{missing} missing, {unexpected} unexpected",
        ),
        Check(
            "bad payloads dead-lettered",
            bad == set(view.dead),
            f"{len(bad)} bad, {len(view.dead)} dead letters",
        ),
        Check(
            "raw copies removed as transport duplicates",
            transport == view.raw_duplicates,
            f"{view.raw_duplicates} raw copies in the archive, {transport} removed",
        ),
        Check(
            "producer retries removed",
            producer_dups == produced.retries,
            f"{produced.retries} retries, {producer_dups} removed",
        ),
        Check(
            "one row per event id",
            rows == distinct == events and lost == 0,
            f"{events:,} events, {rows:,} rows, {distinct:,} distinct ids, {lost} lost",
        ),
    ]


def summary(  # noqa: PLR0917
    produced: Produced,
    view: ArchiveView,
    checks: list[Check],
    chaos: list[str],
    metrics: Counter[str],
    report: str,
    workdir: Path,
    lost: int,
    table: tuple[str, str],
    say: Say,
) -> None:
    """The demo's closing page. ``table``: the compacted table's name and current
    metadata file."""
    name, _ = table
    ok = all(c.ok for c in checks)
    out = say.out
    out.write("\n")
    out.write(f"kinesis-lander demo: {'OK, every count reconciles' if ok else 'FAILED'}\n")
    lines = [
        (
            "produced",
            f"{produced.events:,} events + {produced.retries:,} producer retries + "
            f"{produced.bad} bad payloads = {produced.user_records:,} user records "
            f"({produced.aggregated_user_records:,} of them in {produced.aggregates:,} KPL "
            "aggregates)",
        ),
        (
            "landed",
            f"{sum(view.landed.values()):,} records in {view.files:,} files; "
            f"{sum(view.dead.values())} dead letters; {view.raw_duplicates} raw duplicates",
        ),
        ("duplicates", f"{checks[3].detail}; {checks[2].detail}"),
        ("lost", f"{lost} events produced but not in the compacted output"),
        ("chaos", "; ".join(chaos) or "none"),
        (
            "workers",
            ", ".join(f"{name} {n:,}" for name, n in sorted(metrics.items()))
            + " (from /metrics of the workers still running)",
        ),
        ("report", shown(Path(report.removeprefix("file://"))) if report else "-"),
        (
            "table",
            f"{name} (Apache Iceberg) in the catalog {shown(workdir / 'compacted' / 'catalog.db')}",
        ),
        ("query it", query_line(name, workdir / "compacted")),
        ("logs", shown(workdir / "logs")),
        ("took", f"{time.monotonic() - say.started:.0f} s"),
    ]
    for name, text in lines:
        out.write(f"  {name:<11}{text}\n")
    out.write("\n")
    for check in checks:
        out.write(f"  [{'ok' if check.ok else 'FAIL'}] {check.what}: {check.detail}\n")
    out.flush()


def query_line(table: str, compacted: Path) -> str:
    """A shell command that reads the table with pyiceberg (not this project; the
    ``spark`` extra installs it) through the embedded catalog, offline: its rows and
    distinct event ids."""
    folder = compacted.resolve()
    code = (
        "from pyiceberg.catalog import load_catalog; "
        f'c = load_catalog("lander", type="sql", uri="sqlite:///{folder}/catalog.db", '
        f'warehouse="{folder.as_uri()}"); '
        f'a = c.load_table("{table}").scan().to_arrow(); '
        'print(a.num_rows, "rows,", len(set(a["event_id"].to_pylist())), "event ids")'
    )
    return f"{shlex.quote(shown(Path(sys.executable)))} -c {shlex.quote(code)}"


def shown(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)
