"""A horizon hour read through its index: the hour's published rows and dropped copies.

The next day's run reads the day before for its dedupe horizon. Where those hours are
published from the objects they hold now, it reads their index (Parquet) instead of
every landed object again, and must decide exactly what reading the objects decides:
the rule (:mod:`sparkjobs.compaction.dedupe`) over every copy, dropped ones included.
"""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pytest

from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.compaction.dedupe import Copy, fates
from sparkjobs.io import Filesystem, HadoopFilesystem, LocalFilesystem
from sparkjobs.table.compacted import current_files, window_entries
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STREAM = "orders"
SHARD = "shardId-000000000000"
DAYS = (Window.parse("2026-11-21"), Window.parse("2026-11-22"))


def _line(seq: int, when: str, event: str | None, payload: Any) -> dict[str, Any]:
    """A landed line; ``when``: day of November 2026 and time, ``21T02:00:00``."""
    at = f"2026-11-{when}.000Z"
    line: dict[str, Any] = {
        "stream": STREAM,
        "shard_id": SHARD,
        "sequence_number": str(seq),
        "subsequence_number": 0,
        "partition_key": "p",
        "arrival_ts": at,
    }
    if event is not None:
        line["event_id"] = event
    line["data"] = payload
    return line


def _land(root: Path, name: str, lines: list[dict[str, Any]]) -> None:
    """One object in the documented layout, named for its first arrival's minute."""
    at = lines[0]["arrival_ts"]
    folder = root / f"stream={STREAM}" / f"dt={at[:10]}" / f"hour={at[11:13]}"
    folder = folder / f"minute={at[14:16]}" / f"shard={SHARD}"
    folder.mkdir(parents=True, exist_ok=True)
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    (folder / f"{name}.jsonl.gz").write_bytes(gzip.compress(body))


ARCHIVE = [
    # A retry chain over midnight: kept at 02:00, retried at 22:00 (dropped), again at
    # 12:00 the next day: 34 h after the kept copy but 14 h after the dropped one, so
    # a retry too. Only the dropped copy in the index says so.
    ("a", [_line(1, "21T02:00:00", "e", 1), _line(2, "21T02:00:01", None, 2)]),
    ("b", [_line(3, "21T22:00:00", "e", 3), _line(4, "21T22:00:02", "f", 4)]),
    # a transport copy of line 4, landed under another key
    ("b2", [_line(4, "21T22:00:02", "f", 4)]),
    ("c", [_line(5, "22T12:00:00", "e", 5), _line(6, "22T12:00:01", "g", 6)]),
    # f again, 23 h later: a retry; g's first copy; a record without an id
    ("d", [_line(7, "22T21:00:00", "f", 7), _line(8, "22T21:00:01", None, 8)]),
]  # fmt: skip


def _expected(archive: list[tuple[str, list[dict[str, Any]]]] = ARCHIVE) -> set[int]:
    """The sequence numbers the rule keeps, over every copy of the archive."""
    copies = [
        Copy(SHARD, line["sequence_number"], 0, _ts(line["arrival_ts"]), line.get("event_id"), n)
        for n, lines in archive
        for line in lines
    ]
    found = fates(copies, timedelta(days=1))
    return {int(c.sequence_number) for c, cause in found.items() if cause == "kept"}


def _ts(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _published(output: Path, days: tuple[Window, ...] = DAYS) -> set[int]:
    ref = table_ref(output.as_uri(), STREAM)
    files = [u.removeprefix("file://") for w in days for u in current_files(ref, w)]
    rows = duckdb.execute(f"select sequence_number from read_parquet({files})").fetchall()
    return {int(r[0]) for r in rows}


def _job(archive: Path, output: Path, window: Window) -> CompactJob:
    return CompactJob(archive.as_uri(), STREAM, window, output.as_uri())


def test_the_next_day_reads_the_day_before_through_its_index(
    spark: SparkSession, tmp_path: Path
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "out"
    for name, lines in ARCHIVE:
        _land(archive, name, lines)
    first = compact(spark, _job(archive, output, DAYS[0]))
    assert first.indexed_hours == []
    entries = window_entries(table_ref(output.as_uri(), STREAM), DAYS[0])
    ten_pm = entries["2026-11-21T22"]
    assert ten_pm.indexed
    dropped = output / "_dropped" / f"stream={STREAM}" / first.run_id
    # 22:00 dropped two copies (3: a retry of e; 4 again: a transport copy)
    assert len(list(dropped.glob("dt=2026-11-21/hour=22/*.parquet"))) == ten_pm.dropped > 0
    assert not list(dropped.glob("dt=2026-11-21/hour=02/*"))
    assert entries["2026-11-21T02"].dropped == 0
    assert not list((output / f"stream={STREAM}" / "data").rglob("dt=dropped-*"))

    second = compact(spark, _job(archive, output, DAYS[1]))
    assert second.indexed_hours == ["2026-11-21T02", "2026-11-21T22"]
    assert second.lookback_files == 0, "the day before was read from its objects"
    assert _published(output) == _expected() == {1, 2, 4, 6, 8}
    assert second.total("producer") == 2


def test_a_missing_index_file_reads_the_objects_and_a_late_object_too(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Index files gone (removed by hand): the hour is read from its objects. An hour
    with a late object since it was published: the same, and the result is the rule's."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    for name, lines in ARCHIVE:
        _land(archive, name, lines)
    first = compact(spark, _job(archive, output, DAYS[0]))
    dropped = output / "_dropped" / f"stream={STREAM}" / first.run_id
    for path in dropped.rglob("*.parquet"):
        path.unlink()
    second = compact(spark, _job(archive, output, DAYS[1]))
    assert second.indexed_hours == ["2026-11-21T02"]  # it had nothing dropped to lose
    assert second.lookback_files == 2  # b and b2, at 22:00
    assert _published(output) == _expected()

    # A late object at 22:00, day one not compacted again: day two until 22:30 is stale,
    # and its re-run reads 22:00 from the objects (they changed), 02:00 through its index.
    late = [_line(9, "21T22:30:00", "h", 9)]
    _land(archive, "late", late)
    grown = [*ARCHIVE, ("late", late)]
    third = compact(spark, _job(archive, output, DAYS[1]))
    assert third.indexed_hours == ["2026-11-21T02"]
    assert third.lookback_files == 3  # b, b2 and late, at 22:00
    assert _published(output, DAYS[1:]) == {6, 8}
    compact(spark, _job(archive, output, DAYS[0]))
    assert _published(output) == _expected(grown) == {1, 2, 4, 6, 8, 9}


@pytest.mark.parametrize("kind", ["local", "hadoop"])
def test_both_filesystems_move_a_file_into_new_folders(
    spark: SparkSession, tmp_path: Path, kind: str
) -> None:
    """The move the job uses for dropped copies, through ``os`` and through Hadoop."""
    fs: Filesystem = LocalFilesystem() if kind == "local" else HadoopFilesystem(spark)
    root = f"file://{tmp_path}"  # as the job spells URIs: "=" unescaped
    source = f"{root}/run/dt=dropped-2026-11-21/hour=09/part-0.parquet"
    fs.write_atomic(source, b"rows")
    target = f"{root}/_dropped/run/dt=2026-11-21/hour=09/p.parquet"
    fs.move(source, target)
    assert fs.read(target) == b"rows"
    assert fs.read(source) is None
    listed = [item.uri.rsplit("/", 3)[1:] for item in fs.list_files(f"{root}/_dropped")]
    assert listed == [["dt=2026-11-21", "hour=09", "p.parquet"]]
    fs.delete(f"{root}/run")
    assert not (tmp_path / "run").exists()
