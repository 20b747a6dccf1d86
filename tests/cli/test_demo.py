"""A short `lander demo`, run as the README's first command runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.emulator,
    pytest.mark.processes,
    pytest.mark.spark,  # the demo ends with a compaction
    pytest.mark.timeout(420),
    # The README's first command, end to end: ~64 s of which 40 are Spark's first jobs.
    pytest.mark.fast_tier_budget(150, "the fast tier's one run of the whole pipeline"),
]


def test_a_short_demo_reconciles_every_count(tmp_path: Path) -> None:
    """Workers, a kill -9, a split, compaction and analysis: exit 0 and lost 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "AWS_"))}
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "consumer.cli",
            "demo",
            "--records",
            "3000",
            "--rate",
            "1500",
            "--workdir",
            str(workdir),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr[-3000:]
    assert "kinesis-lander demo: OK, every count reconciles" in out
    assert "kill -9 worker-2" in out
    assert "split shardId-" in out
    assert "  lost       0 events" in out
    assert "[FAIL]" not in out
    assert out.count("[ok]") == 5
    reports = list((workdir / "reports").rglob("report.html"))
    assert len(reports) >= 1
    assert list((workdir / "compacted").rglob("*.parquet"))
    # The closing page names the table and a command that reads it with pyiceberg, not
    # this project: run as printed, it finds every event once.
    assert "  table      lander.demo (Apache Iceberg) in the catalog " in out
    [query] = [line for line in out.splitlines() if line.startswith("  query it ")]
    read = subprocess.run(
        ["bash", "-c", query.removeprefix("  query it ").strip()],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert read.returncode == 0, read.stderr
    [events] = re.findall(r"produced +([\d,]+) events", out)
    events = events.replace(",", "")
    assert read.stdout.split() == [events, "rows,", events, "event", "ids"], read.stdout
    # A second run may wipe what the demo made, and nothing else.
    again = tmp_path / "not-a-demo"
    again.mkdir()
    (again / "keep.txt").write_text("mine")
    refused = subprocess.run(
        [sys.executable, "-m", "consumer.cli", "demo", "--workdir", str(again)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "was not made by lander demo" in refused.stdout
    assert (again / "keep.txt").read_text() == "mine"
