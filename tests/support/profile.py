"""Each test's wall time and CPU, written as JSON Lines (``make test-profile``).

Loaded with ``-p tests.support.profile``; ``--profile-out PATH`` names the file (default
``.cache/test-profile.jsonl``). One line per test: its node id, file, markers, outcome,
wall seconds of setup, call and teardown, and CPU seconds of this process and of the
children it waited for in that time. Children that outlive a test (the session's
emulators, Spark's JVM) are not counted: their CPU shows as time only. Under xdist every
worker appends to the same file (one ``write`` a line).

``python -m tests.support.profile PATH`` prints the 30 dearest tests and the totals by
file and by marker.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

DEFAULT_OUT = Path(".cache/test-profile.jsonl")
MARKERS = ("emulator", "processes", "spark", "deep")


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class _Profile:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.outcomes: dict[str, str] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        start = time.perf_counter()
        own, children = _cpu()
        try:
            return (yield)
        finally:
            now_own, now_children = _cpu()
            row = {
                "test": item.nodeid,
                "file": item.nodeid.split("::", 1)[0],
                "markers": sorted({m.name for m in item.iter_markers()} & set(MARKERS)),
                "outcome": self.outcomes.pop(item.nodeid, "passed"),
                "wall": round(time.perf_counter() - start, 3),
                "cpu": round(now_own - own, 3),
                "children_cpu": round(now_children - children, 3),
            }
            self.out.parent.mkdir(parents=True, exist_ok=True)
            with self.out.open("a") as sink:
                sink.write(json.dumps(row) + "\n")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome != "passed" and self.outcomes.get(report.nodeid) != "failed":
            self.outcomes[report.nodeid] = report.outcome


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--profile-out", default=str(DEFAULT_OUT), help="where each test's time and CPU go"
    )


def pytest_configure(config: pytest.Config) -> None:
    out = Path(config.getoption("--profile-out"))
    if not hasattr(config, "workerinput") and out.exists():
        out.unlink()  # the controller (or a run without xdist) starts the file afresh
    config.pluginmanager.register(_Profile(out), "lander-profile")


def _load(path: Path) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if "test" in row:
                rows[row["test"]] = row
    return list(rows.values())


def summary(rows: list[dict[str, Any]], top: int = 30) -> str:
    """The dearest tests, then wall and CPU by file and by marker, as plain text."""
    lines = [f"{len(rows)} tests, {sum(r['wall'] for r in rows):.1f} s of wall time in all", ""]
    lines.append(f"{'wall s':>7} {'cpu s':>7} {'child':>6}  test")
    for row in sorted(rows, key=lambda r: -r["wall"])[:top]:
        marks = ",".join(row["markers"]) or "-"
        lines.append(
            f"{row['wall']:7.1f} {row['cpu']:7.1f} {row['children_cpu']:6.1f}  "
            f"{row['test']} [{marks}]"
        )
    for title, key in (("file", lambda r: [r["file"]]), ("marker", _marker_keys)):
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for row in rows:
            for name in key(row):
                total = totals[name]
                total[0] += row["wall"]
                total[1] += row["cpu"] + row["children_cpu"]
                total[2] += 1
        lines += ["", f"by {title}:", f"{'wall s':>7} {'cpu s':>7} {'tests':>5}  {title}"]
        for name, (wall, cpu, count) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"{wall:7.1f} {cpu:7.1f} {count:5.0f}  {name}")
    return "\n".join(lines)


def _marker_keys(row: dict[str, Any]) -> list[str]:
    return list(row["markers"]) or ["(none)"]


if __name__ == "__main__":
    print(summary(_load(Path(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT))))
