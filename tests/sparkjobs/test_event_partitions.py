"""Event-time partitions (issue 48, item 4): ``event_ts`` from the payload, the table
partitioned by ``day(event_ts)`` as well as, or instead of, the arrival hour.

The archive is written here line by line (not by the lander's writer): arrival hours
whose events straddle midnight, every notation of a time, events with no readable time,
a replayed object, and a late object whose events are three days old. Each record says
in its own field (``want``) which event time it should get, so the column is checked
against the test's intent, not against the code's parser.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from sparkjobs.analysis.analyse import AnalyseJob, analyse
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.table import compacted
from sparkjobs.table.table import open_table
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

# ~60 s of Spark: the deep tier.
pytestmark = [pytest.mark.spark, pytest.mark.deep]

STREAM = "clicks"
DAY = datetime(2026, 11, 21, tzinfo=UTC)
SHARD = "shardId-000000000000"
LATE_DAY = date(2026, 11, 18)


def _doc(i: int, arrival: datetime, late: bool) -> dict[str, Any]:
    """Record ``i``'s payload: its event time in one of six notations (two of them no
    time at all), up to two minutes before its arrival (so hour 00's first events are
    the day before), or three days before when ``late``."""
    skew = timedelta(minutes=2) - timedelta(seconds=10 * arrival.second)
    at = arrival - (timedelta(days=3) if late else skew)
    at = at.replace(microsecond=at.microsecond // 1000 * 1000)
    doc: dict[str, Any] = {"n": i, "want": at.isoformat()}
    kind = 1 if late else i % 6
    if kind == 0:
        doc["ts"] = at.isoformat().replace("+00:00", "Z")
    elif kind == 1:
        doc["ts"] = int(at.timestamp() * 1000)  # epoch milliseconds
    elif kind == 2:
        at = at.replace(microsecond=0)
        doc["ts"], doc["want"] = int(at.timestamp()), at.isoformat()  # epoch seconds
    elif kind == 3:
        doc["ts"] = (at + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+02:00"
    elif kind == 4:
        doc["want"] = None  # no field
    else:
        doc["ts"], doc["want"] = "soon", None  # not a time
    if late:
        doc["late"] = True  # a field no earlier record has
    return doc


def _write(archive: Path, hour: int, first: int, count: int, **options: Any) -> None:
    """One object of ``count`` records of hour ``hour`` (minute ``minute``), sequence
    numbers from ``first``; ``late``: events three days old."""
    minute, late = options.get("minute", 1), options.get("late", False)
    start = DAY + timedelta(hours=hour, minutes=minute)
    folder = (
        archive
        / f"stream={STREAM}/dt={start:%Y-%m-%d}/hour={start:%H}/minute={start:%M}/shard={SHARD}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        arrival = start + timedelta(seconds=i)
        head = {
            "stream": STREAM,
            "shard_id": SHARD,
            "sequence_number": str(first + i),
            "subsequence_number": 0,
            "partition_key": f"k{i}",
            "arrival_ts": arrival.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        data = json.dumps(_doc(first + i, arrival, late), separators=(",", ":"))
        lines.append(json.dumps(head, separators=(",", ":"))[:-1] + ',"data":' + data + "}\n")
    name = f"{first}-{first + count - 1}.jsonl.gz"
    (folder / name).write_bytes(gzip.compress("".join(lines).encode()))


def _archive(archive: Path) -> None:
    """Hours 00 to 02 of the day (hour 00's events straddle midnight); hour 01 landed
    twice (a replayed object: transport duplicates)."""
    for hour in range(3):
        _write(archive, hour, 1000 * (hour + 1), 12)
    _write(archive, 1, 2000, 12, minute=7)  # the replay: the same records again


def _late(archive: Path) -> None:
    """A late object of hour 01: events three days old."""
    _write(archive, 1, 5000, 6, minute=40, late=True)


def _job(archive: Path, output: Path, window: str, **options: Any) -> CompactJob:
    options = {"event_time_pointer": "/ts", "partition": "arrival_hour,event_day", **options}
    return CompactJob(
        f"file://{archive}", STREAM, Window.parse(window), f"file://{output}", **options
    )


def _table(output: Path) -> Table:
    table = open_table(table_ref(f"file://{output}", STREAM), create=False)
    assert table is not None
    return table


def _rows(table: Table, **scan: Any) -> dict[str, dict[str, Any]]:
    rows = table.scan(**scan).to_arrow().to_pylist()
    by_sequence = {r["sequence_number"]: r for r in rows}
    assert len(by_sequence) == len(rows)  # never a row twice
    return by_sequence


def _untyped(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        n: {k: v for k, v in row.items() if k not in ("payload", "rescued")}
        for n, row in rows.items()
    }


def _wanted(row: dict[str, Any]) -> datetime | None:
    want = json.loads(row["data"])["want"]
    return None if want is None else datetime.fromisoformat(want)


def _day(value: int | None) -> date | None:
    return None if value is None else date(1970, 1, 1) + timedelta(days=value)


def _files(table: Table) -> list[tuple[dict[str, Any], int, list[datetime | None]]]:
    """Each current data file: its partition by field name, its spec, its event times."""
    found = []
    for task in table.scan().plan_files():
        spec = table.specs()[task.file.spec_id]
        partition = {f.name: task.file.partition[i] for i, f in enumerate(spec.fields)}
        path = task.file.file_path.removeprefix("file://")
        names = pq.read_schema(path).names
        times = pq.read_table(path).column("event_ts").to_pylist() if "event_ts" in names else []
        found.append((partition, task.file.spec_id, times))
    return found


def _check_files_by_event_day(table: Table) -> set[tuple[Any, date | None]]:
    """Every file of the current spec holds one arrival hour and one event day (or only
    rows without an event time), and is filed under them; the partitions found."""
    partitions = set()
    for partition, spec_id, times in _files(table):
        if spec_id != table.spec().spec_id:
            continue
        day = _day(partition["event_ts_day"])
        days = {t.date() for t in times if t is not None}
        if day is None:
            assert days == set()
            assert times
        else:
            assert days == {day}
            assert None not in times
        partitions.add((partition.get("arrival_ts_hour"), day))
    return partitions


def test_event_days_split_files_late_events_prune_and_incremental_equals_from_scratch(
    tmp_path: Path, spark: SparkSession
) -> None:
    archive, output, scratch = tmp_path / "archive", tmp_path / "out", tmp_path / "scratch"
    _archive(archive)
    for hour in range(3):
        compact(spark, _job(archive, output, f"2026-11-21T{hour:02d}"))
    # Lands after hour 01 was compacted: the day's run rewrites hour 01 and the hours
    # whose dedupe horizon holds it (02 on), never hour 00.
    _late(archive)
    day = compact(spark, _job(archive, output, "2026-11-21"))
    assert day.stale_hours[:2] == ["2026-11-21T01", "2026-11-21T02"]
    assert day.unchanged_hours == ["2026-11-21T00"]
    # From scratch, untyped: its files carry no field ids either, read by the name mapping.
    whole = compact(spark, _job(archive, scratch, "2026-11-21", payload_schema="off"))
    assert len(whole.stale_hours) == 24

    table = _table(output)
    assert [f.name for f in table.spec().fields] == ["arrival_ts_hour", "event_ts_day"]
    assert table.properties["lander.event-time-pointer"] == "/ts"
    rows = _rows(table)
    assert len(rows) == 36 + 6  # the replayed hour dropped as transport duplicates
    for row in rows.values():
        assert row["event_ts"] == _wanted(row), row["data"]
    # Incremental equals from scratch: the same rows, the same partitions (the typed
    # columns aside).
    assert _untyped(rows) == _untyped(_rows(_table(scratch)))
    partitions = _check_files_by_event_day(table)
    assert partitions == _check_files_by_event_day(_table(scratch))
    hour_0 = (DAY - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(hours=1)
    # Hour 00's events straddle midnight: two event days in it, and its times-less rows.
    assert {d for h, d in partitions if h == hour_0} == {date(2026, 11, 20), DAY.date(), None}
    assert (hour_0 + 1, LATE_DAY) in partitions

    # A query by event day reads only that day's files, and finds the late events there.
    late = "event_ts >= '2026-11-18T00:00:00+00:00' AND event_ts < '2026-11-19T00:00:00+00:00'"
    planned = list(table.scan(row_filter=late).plan_files())
    assert planned
    assert all(_day(t.file.partition[1]) == LATE_DAY for t in planned)
    assert len(planned) < len(list(table.scan().plan_files()))
    assert sorted(_rows(table, row_filter=late)) == [str(n) for n in range(5000, 5006)]
    # No file mixes rows without an event time into a day: IS NULL finds them all.
    nulls = sorted(n for n, r in rows.items() if r["event_ts"] is None)
    assert len(nulls) == 12
    assert sorted(_rows(table, row_filter="event_ts IS NULL")) == nulls

    # A re-run changes nothing: no commit, no new spec or schema.
    snapshots, specs = len(table.metadata.snapshots), len(table.metadata.partition_specs)
    assert compact(spark, _job(archive, output, "2026-11-21")).status == "up-to-date"
    table = _table(output)
    assert (len(table.metadata.snapshots), len(table.metadata.partition_specs)) == (
        snapshots,
        specs,
    )


def test_an_arrival_table_evolves_to_event_days_and_the_analysis_reads_event_ts(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "out"
    _archive(archive)
    first = compact(
        spark,
        _job(archive, output, "2026-11-21", event_time_pointer=None, partition="arrival_hour"),
    )
    assert first.status == "published"
    before = _table(output)
    assert [f.name for f in before.spec().fields] == ["arrival_ts_hour"]
    assert "event_ts" not in {f.name for f in before.schema().fields}

    # A late object in hour 01, a field no sample saw (the sample reads no object): the
    # run types its rows again, in their event-day folders.
    monkeypatch.setattr("sparkjobs.compaction.typedwrite.sample_keys", lambda sizes: [])
    _late(archive)
    second = compact(spark, _job(archive, output, "2026-11-21", partition="event_day"))
    assert second.unchanged_hours == ["2026-11-21T00"]
    assert second.payload["passes"] == 2
    table = _table(output)
    assert [f.name for f in table.spec().fields] == ["event_ts_day"]
    rows = _rows(table)
    assert len(rows) == 42
    files = _files(table)
    old_spec = before.spec().spec_id
    # Hour 00 keeps its file and spec (no event_ts in it: read as null); the files of
    # hours 01 and 02 are new, filed by event day alone.
    assert [spec for _, spec, _ in files].count(old_spec) == 1
    assert {_day(p["event_ts_day"]) for p, spec, _ in files if spec != old_spec} == {
        DAY.date(),
        LATE_DAY,
        None,
    }
    _check_files_by_event_day(table)
    for row in rows.values():
        hour = row["arrival_ts"].hour
        assert row["event_ts"] == (None if hour == 0 else _wanted(row)), row["data"]
        if row["sequence_number"] >= "5000":
            assert row["payload"]["late"] is True
    # The analysis reads event_ts where the compaction wrote it (the table records the
    # pointer), and the payload elsewhere: every event time counts.
    assert compacted.event_pointer(table_ref(f"file://{output}", STREAM)) == "/ts"
    job = AnalyseJob(
        f"file://{output}",
        STREAM,
        Window.parse("2026-11-21"),
        f"file://{tmp_path / 'reports'}",
        event_time_pointer="/ts",
    )
    lateness = analyse(spark, job).lateness
    (whole,) = [lat for lat in lateness if lat.kind == "event" and lat.hour is None]
    assert whole.samples == 42 - 12
