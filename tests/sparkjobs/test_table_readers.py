"""Other engines read the compacted table without project code: DuckDB's iceberg
extension and a plain pyiceberg scan, in a virtualenv that has no ``sparkjobs``.

The day archive (transport copies, producer retries, KPL records) is compacted, then a
late file makes one hour stale and a second run replaces it, so the readers see a table
with an overwrite in its history. Both must return each kept record once, and DuckDB's
``arrival_ts`` filter must prune to one hour. The table is typed and partitioned by event
day too: both read the typed columns, DuckDB reads ``event_ts`` and filters by it.
"""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench import archives
from bench.archives import generate_archive
from bench.sidevenv import REPO, SideVenvError, ensure_venv
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# ~40 s and a side venv: the deep tier (Spark's own reads of the table are in the fast one).
pytestmark = [pytest.mark.deep, pytest.mark.spark, pytest.mark.processes]

READERS = REPO / "tests" / "readers"
STREAM = "orders"


def _readers_python() -> Path:
    try:
        return ensure_venv(REPO / ".venv-readers", READERS / "requirements.txt", "readers")
    except SideVenvError as exc:  # a machine without the registry: say so, loudly
        pytest.fail(f"the readers' virtualenv could not be installed: {exc}")


def _read(python: Path, output: Path, hour: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(python),
            str(READERS / "read_table.py"),
            str(output / "catalog.db"),
            output.as_uri(),
            f"lander.{STREAM}",
            hour,
        ],
        cwd=output,  # not the repository: nothing of the project is importable
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.timeout(900)
def test_duckdb_and_pyiceberg_read_each_record_once(spark: SparkSession, tmp_path: Path) -> None:
    python = _readers_python()
    archive, output = tmp_path / "archive", tmp_path / "compacted"
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9, 10], shards=3,
        records_per_minute=10, records_per_file=13, transport_duplicate_share=0.15,
        producer_duplicate_share=0.05, seed=21,
    )  # fmt: skip
    job = CompactJob(
        archive.as_uri(),
        STREAM,
        Window.parse("2026-11-21"),
        output.as_uri(),
        payload_schema="infer",  # the typed columns, read by both readers too
        event_time_pointer="/ts",  # and the event time, partitioned by its day
        partition="arrival_hour,event_day",
    )
    compact(spark, job)
    archives.add_late_file(truth, archive, 10, records=25)
    second = compact(spark, job)
    assert "2026-11-21T10" in second.published_hours

    found = _read(python, output, "2026-11-21 10:00:00+00")
    for reader in ("pyiceberg", "duckdb"):
        rows = found[reader]
        keyed = {(s, int(q), u): e for s, q, u, e in rows}
        assert len(rows) == len(keyed), f"{reader}: a record is there twice"
        assert keyed == truth.kept, reader
        events = [e for *_, e in rows if e is not None]
        assert len(events) == len(set(events)), f"{reader}: an event id is there twice"
    assert found["duckdb_hour_rows"] == truth.kept_per_hour[10]
    # The payload's typed columns, read without a JSON function, equal the JSON's.
    kept = len(truth.kept)
    assert found["duckdb_typed"] == [kept, 0, "BIGINT"]
    assert found["pyiceberg_typed"] == [kept, 0]
    # Every record's event time, equal to its ts; all on the day (the generator's events
    # are seconds old), found by DuckDB's filter on the event day.
    assert found["partition"] == ["arrival_ts_hour", "event_ts_day"]
    assert found["duckdb_event"] == [kept, 0, kept]
