"""Whatever the run shape, the Spark job publishes what a from-scratch run publishes.

The archive spans two days and holds producer retries minutes to a day apart, and a
late object that lands after both days were compacted: the case where an incremental
re-run used to keep retries whose originals sat in hours it did not rewrite.
test_dedupe_model.py proves the planning over random sequences without Spark; this
runs the job itself over a few shapes: day runs in order, day runs in reverse order
after late data, and single hours.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest

from consumer import cli
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.table.compacted import current_files
from sparkjobs.window import Window
from tests.support.landed import STREAM, line, write_object

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

S0, S1 = "shardId-000000000000", "shardId-000000000001"
DAYS = ("2026-11-21", "2026-11-22")


def _at(minute: str, second: int = 0) -> str:
    return f"{minute}:{second:02d}.000Z"


def _object(root: Path, minute: str, shard: str, records: list[tuple[int, str]]) -> None:
    lines = [
        line(shard, seq, _at(minute, i), event, b'{"e":"%s"}' % event.encode())
        for i, (seq, event) in enumerate(records)
    ]
    write_object(root, minute, shard, lines)


def _on_time(root: Path) -> None:
    _object(root, "2026-11-21T09:12", S0, [(100, "e1"), (101, "e2")])
    _object(root, "2026-11-21T11:30", S1, [(200, "e3")])
    _object(root, "2026-11-21T13:55", S0, [(300, "e1"), (301, "e4")])  # e1: 4h43 later
    _object(root, "2026-11-22T08:00", S1, [(400, "e2"), (401, "e5")])  # e2: 22h48 later
    _object(root, "2026-11-22T10:00", S0, [(500, "e3")])  # e3: 22h30 later
    _object(root, "2026-11-22T14:00", S0, [(501, "e4")])  # e4: 24h05 later: kept again


def _late(root: Path) -> None:
    """Lands after the first runs: an hour before the 13:55 retry, an e1 retry of its
    own, and an event whose retry is the next morning."""
    _object(root, "2026-11-21T12:40", S1, [(600, "e6"), (601, "e1"), (602, "e7")])
    _object(root, "2026-11-22T07:00", S0, [(700, "e7")])


def _rows(output: Path, window: str) -> set[tuple[str, int, str]]:
    files = [
        uri.removeprefix("file://")
        for uri in current_files(table_ref(f"file://{output}", STREAM), Window.parse(window))
    ]
    if not files:
        return set()
    query = f"select shard_id, sequence_number, event_id from read_parquet({files})"
    return {(s, int(q), e) for s, q, e in duckdb.execute(query).fetchall()}


def _run(spark: SparkSession, archive: Path, output: Path, window: str) -> None:
    job = CompactJob(f"file://{archive}", STREAM, Window.parse(window), f"file://{output}")
    compact(spark, job)


OTHER = "payments"
"""The second stream of the multi-stream runs: one event, p1, on the second day."""


def _other_stream(root: Path) -> None:
    write_object(
        root,
        "2026-11-22T03:00",
        S0,
        [line(S0, 900, _at("2026-11-22T03:00"), "p1", b"1", stream=OTHER)],
        stream=OTHER,
    )


def _compact_both(
    monkeypatch: pytest.MonkeyPatch, archive: Path, output: Path, window: str, **env: str
) -> int:
    """``lander compact --stream STREAM,payments`` in this process, with only ``env``
    of the LANDER_ variables set."""
    for key in [k for k in os.environ if k.startswith("LANDER_") and k != "LANDER_SPARK_CDS"]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("sparkjobs.cli.configure_logging", lambda *_, **__: None)
    return cli.main(
        [
            "compact",
            "--stream",
            f"{STREAM},{OTHER}",
            "--archive",
            archive.as_uri(),
            "--compacted",
            output.as_uri(),
            "--window",
            window,
        ]
    )


@pytest.mark.deep  # ~17 s of Spark runs; test_dedupe_model holds the rule in the fast tier
def test_runs_before_and_after_late_data_publish_the_from_scratch_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    _on_time(archive)
    incremental = tmp_path / "incremental"
    for day in DAYS:
        _run(spark, archive, incremental, day)
    _late(archive)
    for day in reversed(DAYS):  # any order: each day's hours depend on raw inputs only
        _run(spark, archive, incremental, day)

    scratch = tmp_path / "scratch"
    for day in DAYS:
        _run(spark, archive, scratch, day)
    assert _rows(scratch, DAYS[0]) == {
        (S0, 100, "e1"),
        (S0, 101, "e2"),
        (S1, 200, "e3"),
        (S1, 600, "e6"),
        (S1, 602, "e7"),
        (S0, 301, "e4"),
    }
    assert _rows(scratch, DAYS[1]) == {(S1, 401, "e5"), (S0, 501, "e4")}
    for day in DAYS:
        assert _rows(incremental, day) == _rows(scratch, day), day

    hours = tmp_path / "hours"
    for hour in ("2026-11-21T13", "2026-11-22T07", "2026-11-22T08", "2026-11-22T14"):
        _run(spark, archive, hours, hour)
        assert _rows(hours, hour) == _rows(scratch, hour), hour


def test_one_run_of_two_streams_and_a_day_range_publishes_what_runs_one_by_one_do(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--stream a,b --window D1..D2``: every stream's every day in the one session."""
    archive = tmp_path / "archive"
    _on_time(archive)
    _late(archive)
    other = OTHER
    _other_stream(archive)
    together = tmp_path / "together"
    code = _compact_both(monkeypatch, archive, together, f"{DAYS[0]}..{DAYS[1]}")
    # payments has nothing on the first day: said, and the exit code says so too.
    assert code == 3
    out, err = capsys.readouterr()
    done = re.findall(r"^(\S+ [0-9-]{10}: \w+);", out, re.MULTILINE)
    assert done == [
        f"{STREAM} {DAYS[0]}: published",
        f"{STREAM} {DAYS[1]}: published",
        f"{other} {DAYS[1]}: published",
    ]
    assert f"no landed input for stream {other} in window {DAYS[0]}" in err

    scratch = tmp_path / "scratch"
    for day in DAYS:
        _run(spark, archive, scratch, day)
        assert _rows(together, day) == _rows(scratch, day), day
    files = current_files(table_ref(together.as_uri(), other), Window.parse(DAYS[1]))
    rows = duckdb.execute(
        f"select event_id, data from read_parquet({[f.removeprefix('file://') for f in files]})"
    ).fetchall()
    assert rows == [("p1", "1")]


def test_a_stream_whose_streams_file_table_moves_its_archive_is_compacted_from_there(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LANDER_STREAMS_FILE, the workers' file: one run of two streams reads each from
    the archive its table names (the other from LANDER_ARCHIVE)."""
    archive, elsewhere = tmp_path / "archive", tmp_path / "elsewhere"
    _on_time(archive)
    other = OTHER
    _other_stream(elsewhere)
    streams_file = tmp_path / "streams.toml"
    streams_file.write_text(f'[streams."pay*"]\narchive = "{elsewhere.as_uri()}"\n')
    output = tmp_path / "compacted"
    code = _compact_both(
        monkeypatch, archive, output, DAYS[1], LANDER_STREAMS_FILE=str(streams_file)
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"{other} {DAYS[1]}: published" in out
    files = current_files(table_ref(output.as_uri(), other), Window.parse(DAYS[1]))
    rows = duckdb.execute(
        f"select event_id from read_parquet({[f.removeprefix('file://') for f in files]})"
    ).fetchall()
    assert rows == [("p1",)]
    assert _rows(output, DAYS[1])  # the other stream, from LANDER_ARCHIVE
