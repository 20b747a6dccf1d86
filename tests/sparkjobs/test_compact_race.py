"""Two `lander compact` processes racing on one table: every hour ends published once,
from the newest inputs.

A day run and an hour run of the same day start together, each its own JVM, on the
same archive and the same embedded catalog. Whichever commits second finds the other's
snapshot: for the hour they share, the run with the newer listing keeps it, the other
drops its copy. Iceberg's validation (a commit that collides with one made after the
run read the table) is exercised in-process with both commits held at a barrier
(tests/sparkjobs/test_compact.py); here the processes are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pytest

from bench.archives import generate_archive
from sparkjobs.catalog import table_ref
from sparkjobs.table.compacted import current_files, window_entries
from sparkjobs.window import Window

pytestmark = [pytest.mark.deep, pytest.mark.processes, pytest.mark.spark]  # two JVMs: ~85 s

STREAM = "orders"
DAY = "2026-11-21"
HOUR = "2026-11-21T10"


def _start(archive: Path, output: Path, window: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANDER_", "PYICEBERG_"))}
    env.update(
        LANDER_STREAM=STREAM,
        LANDER_ARCHIVE=archive.as_uri(),
        LANDER_COMPACTED=output.as_uri(),
        LANDER_WINDOW=window,
        LANDER_SPARK_MASTER="local[1]",
        LANDER_LOG_FORMAT="json",
        PYSPARK_PYTHON=sys.executable,
    )
    return subprocess.Popen(
        [sys.executable, "-m", "sparkjobs", "compact"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(600)
def test_a_day_run_and_an_hour_run_racing_publish_each_record_once(tmp_path: Path) -> None:
    archive, output = tmp_path / "archive", tmp_path / "compacted"
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9, 10], shards=3,
        records_per_minute=8, records_per_file=11, transport_duplicate_share=0.15,
        producer_duplicate_share=0.05, seed=11,
    )  # fmt: skip
    runs = {window: _start(archive, output, window) for window in (DAY, HOUR)}
    results = {window: run.communicate(timeout=540) for window, run in runs.items()}
    for window, run in runs.items():
        assert run.returncode == 0, results[window][1][-3000:]
    assert f"{DAY}: published" in results[DAY][0]
    assert f"{HOUR}: " in results[HOUR][0]

    manifests = [
        json.loads(p.read_text()) for p in (output / "_manifests" / f"stream={STREAM}").iterdir()
    ]
    assert len(manifests) == 2
    newest = max(manifests, key=lambda m: (m["listed_at"], m["run_id"]))
    older = next(m for m in manifests if m is not newest)
    assert HOUR in newest["published_hours"]
    # The older listing either committed first (its hour then replaced by the newer) or
    # second (it found the newer entry and dropped its copy).
    assert (HOUR in older["published_hours"]) != (HOUR in older["superseded_hours"])
    ref = table_ref(output.as_uri(), STREAM)
    entries = window_entries(ref, Window.parse(DAY))
    assert len(entries) == 24
    assert entries[HOUR].run_id == newest["run_id"]

    files = [f.removeprefix("file://") for f in current_files(ref, Window.parse(DAY))]
    rows = duckdb.execute(
        f"select shard_id, sequence_number, subsequence_number, event_id from read_parquet({files})"
    ).fetchall()
    assert len(rows) == len(truth.kept)
    assert {(s, int(q), u): e for s, q, u, e in rows} == truth.kept
    if HOUR in older["superseded_hours"]:  # its files of that hour are gone, never published
        data = output / f"stream={STREAM}" / "data" / older["run_id"]
        assert not (data / "dt=2026-11-21" / "hour=10").exists()
