"""The compaction and analysis jobs in local[2] on file://, checked with DuckDB.

Archives come from bench/archives.py, whose truth says what a correct
compaction keeps. The output is read back with DuckDB from the files the Iceberg table
lists, never with Spark.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow.parquet as pq
import pytest
import structlog

from bench import archives
from bench.archives import Truth, generate_archive
from sparkjobs.analysis.analyse import AnalyseJob, analyse
from sparkjobs.catalog import TableRef, table_ref
from sparkjobs.compaction.compact import CompactionError, CompactJob, RunManifest, compact
from sparkjobs.table import table as table_module
from sparkjobs.table.compacted import current_files, window_entries
from sparkjobs.table.manifest import manifest_uri
from sparkjobs.table.table import open_table
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAY = date(2026, 11, 21)
STREAM = "orders"
WINDOW = Window.parse("2026-11-21")


def _job(archive: Path, output: Path, window: Window = WINDOW, **options: Any) -> CompactJob:
    return CompactJob(f"file://{archive}", STREAM, window, f"file://{output}", **options)


def _ref(output: Path) -> TableRef:
    return table_ref(f"file://{output}", STREAM)


def _files(output: Path, window: Window = WINDOW) -> list[str]:
    uris = current_files(_ref(output), window)
    return [uri.removeprefix("file://") for uri in uris]


def _rows(output: Path, window: Window = WINDOW, columns: str = "") -> list[tuple[Any, ...]]:
    """Compacted rows as (shard, sequence as int, subsequence, event id[, columns…])."""
    files = _files(output, window)
    if not files:
        return []
    extra = f", {columns}" if columns else ""
    query = (
        "select shard_id, sequence_number, subsequence_number, event_id"
        f"{extra} from read_parquet({files}) order by all"
    )
    return [(r[0], int(r[1]), *r[2:]) for r in duckdb.execute(query).fetchall()]


def _operation(snapshot: Any) -> str:
    """What Iceberg calls a snapshot's commit (append, overwrite, …)."""
    assert snapshot.summary is not None
    return str(snapshot.summary.operation.value)


def _assert_exactly_the_truth(output: Path, truth: Truth, window: Window = WINDOW) -> None:
    rows = _rows(output, window)
    positions = [(shard, seq, sub) for shard, seq, sub, _ in rows]
    assert len(positions) == len(set(positions)), "a position is in the output twice"
    assert {(s, q, u): e for s, q, u, e in rows} == truth.kept
    events = [e for *_, e in rows if e is not None]
    assert len(events) == len(set(events)), "an event id is in the output twice"


@pytest.fixture(scope="module")
def day_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """Two hours of four shards with transport, producer and KPL records."""
    root = tmp_path_factory.mktemp("archive")
    truth = generate_archive(
        root,
        stream=STREAM,
        day=DAY,
        hours=[9, 10],
        shards=4,
        records_per_minute=20,
        records_per_file=13,
        transport_duplicate_share=0.2,
        producer_duplicate_share=0.05,
        aggregated_share=0.2,
        seed=7,
    )
    return root, truth


@pytest.fixture(scope="module")
def compacted_day(
    spark: SparkSession, day_archive: tuple[Path, Truth], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, RunManifest]:
    """The day archive compacted once (shared by the tests that only read it)."""
    archive, _ = day_archive
    output = tmp_path_factory.mktemp("compacted")
    return output, compact(spark, _job(archive, output))


def test_each_record_is_kept_exactly_once(
    day_archive: tuple[Path, Truth], compacted_day: tuple[Path, RunManifest]
) -> None:
    """Transport copies and producer re-sends are gone; every record is there once."""
    _, truth = day_archive
    output, manifest = compacted_day
    assert truth.transport_duplicates > 0
    assert truth.producer_duplicates > 0
    _assert_exactly_the_truth(output, truth)
    assert manifest.status == "published"
    assert manifest.total("input_rows") == truth.readable_lines
    assert manifest.total("transport") == truth.transport_duplicates
    assert manifest.total("producer") == truth.producer_duplicates
    assert manifest.total("output_rows") == len(truth.kept)
    assert {h.hour: h.output_rows for h in manifest.hours if h.output_rows} == {
        f"2026-11-21T{hour:02d}": n for hour, n in truth.kept_per_hour.items()
    }
    assert len(manifest.inputs) == len(truth.files)
    # Hours with no input are published too (empty), so the day is complete.
    assert len(window_entries(_ref(output), WINDOW)) == 24


def test_output_is_partitioned_and_timestamps_are_utc_micros(
    compacted_day: tuple[Path, RunManifest],
) -> None:
    """Files sit under dt=/hour=; arrival_ts is a UTC instant other readers agree on."""
    output, manifest = compacted_day
    files = _files(output)
    assert {Path(f).parent.name for f in files} == {"hour=09", "hour=10"}
    assert all(Path(f).parent.parent.name == "dt=2026-11-21" for f in files)
    kinds = duckdb.execute(
        f"select distinct typeof(arrival_ts), typeof(landed_ts) from read_parquet({files})"
    ).fetchall()
    assert kinds == [("TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE")]
    hours = duckdb.execute(
        "select distinct strftime(arrival_ts at time zone 'UTC', '%H') "
        f"from read_parquet({files}, hive_partitioning=false) order by 1"
    ).fetchall()
    assert hours == [("09",), ("10",)]
    # What every landed record has is required, in the table and in its files.
    table = open_table(table_ref(f"file://{output}", STREAM), create=False)
    assert table is not None
    required = ["stream", "shard_id", "sequence_number", "subsequence_number", "arrival_ts"]
    assert [f.name for f in table.schema().fields if f.required] == required
    in_file = pq.read_schema(files[0])
    assert [name for name in in_file.names if not in_file.field(name).nullable] == required
    manifest_file = manifest_uri(f"file://{output}", STREAM, manifest.run_id)
    written = json.loads(Path(manifest_file.removeprefix("file://")).read_text())
    assert written["totals"]["output_rows"] == manifest.total("output_rows")
    assert written["timings"]["total_s"] > 0


def test_the_table_holds_only_its_data_files_each_naming_the_sort_order(
    compacted_day: tuple[Path, RunManifest],
) -> None:
    """No _SUCCESS or .crc beside the data files (Spark's leftovers), every data file
    names the table's sort order, and the first commit is an append."""
    output, _ = compacted_day
    data = output / f"stream={STREAM}" / "data"
    everything = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    assert everything, "no data files"
    assert all(name.endswith(".parquet") for name in everything), everything
    assert {f.removeprefix(f"{data}/") for f in _files(output)} == set(everything)
    table = open_table(_ref(output))
    assert table is not None
    order = table.sort_order()
    assert order.order_id == 1
    assert [field.transform.__class__.__name__ for field in order.fields] == ["IdentityTransform"]
    tasks = list(table.scan().plan_files())
    assert {task.file.sort_order_id for task in tasks} == {order.order_id}
    operations = [_operation(snapshot) for snapshot in table.snapshots()]
    assert operations == ["append"]


def test_each_hour_is_one_file_or_as_many_as_keep_each_near_the_target(
    spark: SparkSession, day_archive: tuple[Path, Truth], tmp_path: Path
) -> None:
    """A small hour is one file (not one per core); an hour of three targets' worth of
    input is three files; every record is still there once."""
    archive, truth = day_archive
    nine = sum(
        f.stat().st_size for f in archive.rglob("*") if f.is_file() and "/hour=09/" in str(f)
    )
    assert nine > 0
    small = compact(spark, _job(archive, tmp_path / "small"))
    split = compact(spark, _job(archive, tmp_path / "split", target_file_bytes=nine // 3 + 1))
    assert small.status == split.status == "published"
    per_hour = {
        name: Counter(Path(f).parent.name for f in _files(tmp_path / name))
        for name in ("small", "split")
    }
    assert per_hour["small"] == {"hour=09": 1, "hour=10": 1}
    assert per_hour["split"]["hour=09"] == 3
    _assert_exactly_the_truth(tmp_path / "split", truth)


def test_a_rerun_changes_nothing_and_a_fresh_run_gives_the_same_rows(
    spark: SparkSession,
    day_archive: tuple[Path, Truth],
    compacted_day: tuple[Path, RunManifest],
    tmp_path: Path,
) -> None:
    """Same inputs: the rerun is a no-op, and compacting afresh gives identical rows."""
    archive, _ = day_archive
    output, first = compacted_day
    again = compact(spark, _job(archive, output))
    assert again.status == "up-to-date"
    assert again.stale_hours == []
    fresh = compact(spark, _job(archive, tmp_path))
    assert fresh.total("output_rows") == first.total("output_rows")
    columns = "partition_key, data, arrival_ts::varchar, landed_ts::varchar"
    assert _rows(tmp_path, columns=columns) == _rows(output, columns=columns)


def test_hour_windows_catch_producer_retries_across_the_boundary(
    spark: SparkSession, day_archive: tuple[Path, Truth], tmp_path: Path
) -> None:
    """Compacted hour by hour, a re-send just after 10:00 of an event first seen before
    it is still dropped (the horizon before 10 is read, 09:00 through its index), and the
    two hours add up to the day."""
    archive, truth = day_archive
    nine = compact(spark, _job(archive, tmp_path, Window.parse("2026-11-21T09")))
    ten = compact(spark, _job(archive, tmp_path, Window.parse("2026-11-21T10")))
    assert (ten.indexed_hours, ten.lookback_files) == (["2026-11-21T09"], 0)
    assert nine.total("producer") + ten.total("producer") == truth.producer_duplicates
    _assert_exactly_the_truth(tmp_path, truth)


def test_a_late_file_rewrites_its_hour_and_the_horizon_after_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Files landed after the window was compacted are found; their hour and the hours
    within the dedupe horizon after it (the rest of the day) are redone, not those before."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    truth = generate_archive(
        archive, stream=STREAM, day=DAY, hours=[9, 10], shards=2,
        records_per_minute=5, records_per_file=7, producer_duplicate_share=0.1, seed=3,
    )  # fmt: skip
    first = compact(spark, _job(archive, output))
    archives.add_late_file(truth, archive, 10, records=30)
    second = compact(spark, _job(archive, output))
    assert second.stale_hours == [f"2026-11-21T{h:02d}" for h in range(10, 24)]
    assert second.unchanged_hours == [f"2026-11-21T{h:02d}" for h in range(10)]
    entries = window_entries(_ref(output), WINDOW)
    assert entries["2026-11-21T09"].run_id == first.run_id
    assert entries["2026-11-21T10"].run_id == second.run_id
    _assert_exactly_the_truth(output, truth)
    # The first run added files (an append); the second replaced hour 10's (docs say so).
    table = open_table(_ref(output))
    assert table is not None
    operations = [_operation(snapshot) for snapshot in table.snapshots()]
    assert operations == ["append", "overwrite"]


def test_bad_input_is_counted_reported_and_the_rest_compacted(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Truncated, corrupt, non-gzip and malformed input: each reported with its file;
    truncated files give up their complete lines; nothing else is lost."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    truth = generate_archive(
        archive, stream=STREAM, day=DAY, hours=[9], shards=2,
        records_per_minute=10, records_per_file=40, transport_duplicate_share=0.1, seed=5,
    )  # fmt: skip
    plain = sorted(truth.files, key=lambda f: f.stat().st_size, reverse=True)
    archives.truncate(truth, plain[0], 0.6)
    archives.corrupt(truth, plain[1])
    junk = archives.not_gzip(truth, archive, hour=9, minute=3)
    bad_lines = archives.malformed(truth, archive, hour=9, minute=4)
    manifest = compact(spark, _job(archive, output))
    found = {(Path(b.file).name, b.kind) for b in manifest.bad_files}
    assert (plain[0].name, "truncated") in found
    assert (plain[1].name, "corrupt") in found
    assert (junk.name, "corrupt") in found
    malformed = [b for b in manifest.bad_files if b.kind == "malformed"]
    assert {Path(b.file).name for b in malformed} == {bad_lines.name}
    assert sum(b.lines for b in malformed) == truth.damaged[bad_lines].bad_lines
    assert manifest.total("malformed") == truth.damaged[bad_lines].bad_lines
    assert manifest.total("transport") == truth.transport_duplicates
    _assert_exactly_the_truth(output, truth)


def test_strict_mode_publishes_nothing(spark: SparkSession, tmp_path: Path) -> None:
    """With --strict, one bad file fails the window and leaves no trace in the output:
    no data file, no snapshot."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    truth = generate_archive(
        archive, stream=STREAM, day=DAY, hours=[9], shards=1,
        records_per_minute=5, records_per_file=50, seed=1,
    )  # fmt: skip
    archives.not_gzip(truth, archive, hour=9)
    with pytest.raises(CompactionError, match="strict: 1 bad input"):
        compact(spark, _job(archive, output, strict=True))
    stream_folder = output / f"stream={STREAM}"
    assert not list((stream_folder / "data").glob("*/dt=*/*/*.parquet"))
    table = open_table(_ref(output), create=False)
    assert table is None or table.current_snapshot() is None


@pytest.mark.parametrize("failure", ["a bug", "out of memory", "access denied"])
def test_a_failure_that_is_not_the_input_fails_the_window_in_one_line(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """Only damaged input sends the fast read to the check and a second read: a bug,
    the JVM out of memory or S3 refusing access (real Java exceptions, as Spark hands a
    task's failure over) is not bad input. The window fails at once with one line that
    names what failed, checks no object and leaves nothing written."""
    from py4j.protocol import Py4JJavaError

    from sparkjobs.compaction.sparkplan import SparkPlan

    archive, output = tmp_path / "archive", tmp_path / "out"
    generate_archive(
        archive, stream=STREAM, day=DAY, hours=[9], shards=1,
        records_per_minute=5, records_per_file=50, seed=1,
    )  # fmt: skip
    jvm: Any = spark.sparkContext._jvm
    cause = {
        "a bug": None,
        "out of memory": jvm.java.lang.OutOfMemoryError("Java heap space"),
        "access denied": jvm.java.nio.file.AccessDeniedException(
            f"s3a://bucket/stream={STREAM}/dt=2026-11-21/hour=09/o.jsonl.gz: 403 Forbidden"
        ),
    }[failure]

    def run(self: SparkPlan, *_: Any, **__: Any) -> Any:
        (Path(self.run_dir.removeprefix("file://")) / "part-0.parquet").parent.mkdir(
            parents=True, exist_ok=True
        )
        if cause is None:
            raise RuntimeError("a bug in the fast path")
        aborted = jvm.org.apache.spark.SparkException("Job aborted due to stage failure", cause)
        raise Py4JJavaError("An error occurred while calling o942.parquet.\n", aborted)

    checked: list[Any] = []

    def check_inputs(*args: Any) -> dict[str, Any]:
        checked.append(args)
        return {}

    monkeypatch.setattr(SparkPlan, "run", run)
    monkeypatch.setattr("sparkjobs.compaction.compact.check_inputs", check_inputs)
    with structlog.testing.capture_logs() as logs, pytest.raises(CompactionError) as failed:
        compact(spark, _job(archive, output))
    assert checked == [], "a failure that is not the input's was taken for bad input"
    # Spark's task-failure loggers were quiet for that read: the job logs it whole.
    (error,) = [entry for entry in logs if entry["log_level"] == "error"]
    assert error["event"] == "read failed"
    assert str(failed.value.__cause__) == error["error"]
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith("compacting 2026-11-21 failed: ")
    assert message.endswith(
        {
            "a bug": "RuntimeError: a bug in the fast path",
            "out of memory": "java.lang.OutOfMemoryError: Java heap space",
            "access denied": "403 Forbidden",
        }[failure]
    )
    assert not list((output / f"stream={STREAM}" / "data").glob("*"))


def test_two_runs_at_once_leave_one_consistent_window(
    spark: SparkSession, day_archive: tuple[Path, Truth], tmp_path: Path
) -> None:
    """A day run and an hour run racing on the same output: each record is read once, and
    the hour they share is the one listed last (the other run's copy of it is dropped
    when that run commits second)."""
    archive, truth = day_archive
    manifests: list[RunManifest] = []
    errors: list[BaseException] = []

    def run(window: str) -> None:
        try:
            manifests.append(compact(spark, _job(archive, tmp_path, Window.parse(window))))
        except BaseException as exc:
            errors.append(exc)

    _day_and_hour_at_once(run)
    assert not errors
    _assert_exactly_the_truth(tmp_path, truth)
    latest = max(manifests, key=lambda m: (m.listed_at, m.run_id))
    assert "2026-11-21T10" in latest.published_hours
    day = next(m for m in manifests if m.window == "2026-11-21")
    assert set(day.published_hours) >= {f"2026-11-21T{h:02d}" for h in range(24)} - {
        "2026-11-21T10"
    }
    entries = window_entries(_ref(tmp_path), WINDOW)
    assert entries["2026-11-21T10"].run_id == latest.run_id


def test_commits_that_collide_replan_and_the_newest_listing_keeps_the_hour(
    spark: SparkSession,
    day_archive: tuple[Path, Truth],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both runs plan and write before either commits (held at a barrier), then commit at
    once: one commit fails Iceberg's validation, that run reads the table again and
    keeps only the hours it still wins, and every record is in the table once."""
    archive, truth = day_archive
    barrier = threading.Barrier(2, timeout=240)
    commit = table_module._overwrite

    waited: set[str] = set()

    def held(*args: Any, **kwargs: Any) -> int | None:
        name = threading.current_thread().name
        if name.startswith("run-") and name not in waited:  # the first commit only
            waited.add(name)
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return commit(*args, **kwargs)

    monkeypatch.setattr(table_module, "_overwrite", held)
    manifests: dict[str, RunManifest] = {}
    errors: list[BaseException] = []

    def run(window: str) -> None:
        threading.current_thread().name = f"run-{window}"
        try:
            manifests[window] = compact(spark, _job(archive, tmp_path, Window.parse(window)))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    _day_and_hour_at_once(run)
    assert not errors
    day, hour = manifests["2026-11-21"], manifests["2026-11-21T10"]
    assert sorted([day.commit_attempts, hour.commit_attempts]) == [1, 2]
    newest = max((day, hour), key=lambda m: (m.listed_at, m.run_id))
    older = hour if newest is day else day
    assert "2026-11-21T10" in newest.published_hours
    # First to commit: the older run's hour is then replaced; second: it drops its copy.
    if older.commit_attempts == 2:
        assert older.superseded_hours == ["2026-11-21T10"]
    else:
        assert "2026-11-21T10" in older.published_hours
    assert window_entries(_ref(tmp_path), WINDOW)["2026-11-21T10"].run_id == newest.run_id
    _assert_exactly_the_truth(tmp_path, truth)


def _day_and_hour_at_once(run: Callable[[str], None]) -> None:
    """``run`` for the day and for its hour 10, in two threads at once."""
    threads = [threading.Thread(target=run, args=(w,)) for w in ("2026-11-21", "2026-11-21T10")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_analysis_tables_and_report(
    spark: SparkSession,
    day_archive: tuple[Path, Truth],
    compacted_day: tuple[Path, RunManifest],
    tmp_path: Path,
) -> None:
    """Volume adds up to the output, duplicates match the manifest, no duplicate remains,
    lateness and gaps are computed, and the report is written."""
    archive, truth = day_archive
    output, manifest = compacted_day
    job = AnalyseJob(
        compacted=f"file://{output}",
        stream=STREAM,
        window=WINDOW,
        reports=f"file://{tmp_path}",
        archive=f"file://{archive}",
        event_time_pointer="/ts",
        sequence_pointer="/seq",
    )
    found = analyse(spark, job)
    assert found.records == len(truth.kept)
    assert found.remaining_duplicates == 0
    tables = tmp_path / f"stream={STREAM}" / "2026-11-21" / "tables"

    def one(query: str) -> Any:
        return duckdb.execute(query).fetchall()[0][0]

    assert one(f"select sum(records) from '{tables}/volume/*.parquet'") == len(truth.kept)
    assert one(f"select sum(transport) from '{tables}/duplicates/*.parquet'") == manifest.total(
        "transport"
    )
    assert one(f"select sum(producer) from '{tables}/duplicates/*.parquet'") == manifest.total(
        "producer"
    )
    whole = duckdb.execute(
        f"select kind, samples, p50_ms from '{tables}/lateness/*.parquet' "
        "where hour is null order by kind"
    ).fetchall()
    assert [(k, n) for k, n, _ in whole] == [
        ("event", len(truth.kept)),
        ("landing", len(truth.kept)),
    ]
    event_p50 = whole[0][2]
    assert 0 < event_p50 < 2_000  # payload ts is 5 ms - 2 s before arrival
    assert one(f"select sum(missing) from '{tables}/gaps/*.parquet'") == 0
    assert one(f"select sum(records) from '{tables}/shards/*.parquet'") == len(truth.kept)
    report = (tmp_path / f"stream={STREAM}" / "2026-11-21" / "report.html").read_text()
    assert STREAM in report
    assert "<svg" in report


def _landed_file(root: Path, minute: str, shard: str, lines: list[dict[str, Any]]) -> None:
    folder = root / f"stream={STREAM}" / "dt=2026-11-21" / f"hour={minute[:2]}"
    folder = folder / f"minute={minute[3:]}" / f"shard={shard}"
    folder.mkdir(parents=True, exist_ok=True)
    first, last = lines[0]["sequence_number"], lines[-1]["sequence_number"]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    (folder / f"{first}-{last}.jsonl.gz").write_bytes(gzip.compress(body))


def test_sequence_gaps_and_reorders_are_counted(spark: SparkSession, tmp_path: Path) -> None:
    """Producer p sends 1, 2, 5, 4, 6: one gap (3 missing) and one reorder (4 after 5)."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    lines = [
        {
            "stream": STREAM,
            "shard_id": "shardId-000000000000",
            "sequence_number": str(1000 + i),
            "subsequence_number": 0,
            "partition_key": "p",
            "arrival_ts": f"2026-11-21T09:00:0{i}.000Z",
            "data": {"seq": seq},
        }
        for i, seq in enumerate([1, 2, 5, 4, 6])
    ]
    _landed_file(archive, "09:00", "shardId-000000000000", lines)
    compact(spark, _job(archive, output, Window.parse("2026-11-21T09")))
    job = AnalyseJob(
        compacted=f"file://{output}",
        stream=STREAM,
        window=Window.parse("2026-11-21T09"),
        reports=f"file://{tmp_path / 'reports'}",
        sequence_pointer="/seq",
    )
    found = analyse(spark, job)
    assert [(g.producer, g.first, g.last, g.gaps, g.missing, g.reorders) for g in found.gaps] == [
        ("p", 1, 6, 1, 1, 1)
    ]
