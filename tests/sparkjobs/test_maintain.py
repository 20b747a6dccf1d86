"""`lander maintain`: snapshots expire, unreferenced files go, what readers read stays.

The table goes through what a month of nightly runs does to it: a first compaction, a
late file whose hours a second run replaces, and a run that crashes between its
Parquet write and its commit (its files are on disk, the table never names them).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import archives
from bench.archives import generate_archive
from sparkjobs.catalog import TableRef, table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.io import LocalFilesystem
from sparkjobs.table import table as table_module
from sparkjobs.table.compacted import current_files, hour_runs
from sparkjobs.table.maintain import Found, maintain, orphans, referenced_files
from sparkjobs.table.manifest import newest_by_hour
from sparkjobs.table.table import open_table, published
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STREAM = "orders"
DAY = Window.parse("2026-11-21")

files = st.lists(
    st.builds(
        Found,
        st.sampled_from([f"file:///t/data/{i}.parquet" for i in range(8)]),
        st.integers(0, 100),
        st.integers(0, 1000),
    ),
    unique_by=lambda f: f.uri,
)


@given(files, st.sets(st.sampled_from([f"file:///t/data/{i}.parquet" for i in range(8)])))
def test_only_old_files_nothing_references_are_orphans(
    found: list[Found], referenced: set[str]
) -> None:
    old, young = orphans(found, referenced, 500)
    for f in found:
        if f.uri in referenced or f.modified_ms >= 500:
            assert f.uri not in old
        else:
            assert f.uri in old
    assert young == sum(1 for f in found if f.uri not in referenced and f.modified_ms >= 500)


def test_the_newest_manifest_to_publish_an_hour_names_its_run() -> None:
    def made(
        run: str, listed: str, published: list[str], status: str = "published"
    ) -> dict[str, object]:
        return {"run_id": run, "listed_at": listed, "status": status, "published_hours": published}

    found = newest_by_hour(
        [
            made("a", "t1", ["h1", "h2"]),
            made("b", "t2", ["h2"]),
            made("c", "t3", ["h1"], status="superseded"),
            {"run_id": "old", "listed_at": "t0", "status": "published", "hours": [{"hour": "h3"}]},
        ]
    )
    assert found == {"h1": "a", "h2": "b", "h3": "old"}


class _CrashError(BaseException):
    """A process dying between the write and the commit."""


@pytest.mark.spark
def test_maintenance_expires_and_removes_what_no_snapshot_reads(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "compacted"
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9, 10], shards=2,
        records_per_minute=6, records_per_file=9, transport_duplicate_share=0.1,
        producer_duplicate_share=0.05, seed=8,
    )  # fmt: skip
    job = CompactJob(archive.as_uri(), STREAM, DAY, output.as_uri())
    ref = table_ref(output.as_uri(), STREAM)
    first = compact(spark, job)
    archives.add_late_file(truth, archive, 10, records=20)
    second = compact(spark, job)
    expected = dict(truth.kept)
    hour_nine = set(current_files(ref, Window.parse("2026-11-21T09")))  # the first run's

    archives.add_late_file(truth, archive, 10, records=5)

    def crash(*_: object, **__: object) -> None:
        raise _CrashError

    monkeypatch.setattr(table_module, "replace_hours", crash)
    with pytest.raises(_CrashError):
        compact(spark, job)
    monkeypatch.undo()
    folders = {p.name for p in (output / f"stream={STREAM}" / "data").iterdir()}
    assert len(folders) == 3
    assert {first.run_id, second.run_id} < folders
    assert _rows(ref) == expected, "the crashed run's files are visible"
    assert all(first.run_id in f or second.run_id in f for f in current_files(ref, DAY))

    # Now: every snapshot is young and every orphan too young to delete.
    now = datetime.now(UTC)
    nothing = maintain(ref, now, timedelta(days=7), timedelta(days=3))
    assert (nothing.snapshots_expired, nothing.files_deleted) == (0, 0)
    assert nothing.orphans_too_young > 0

    # Each run keeps the copies its dedupe dropped beside the table, per hour.
    assert (first.run_id, "dt=2026-11-21/hour=10") in _dropped(output)

    # Ten days on: old snapshots go, and so does every file only they (or nobody) read:
    # the replaced hours of the first run, the crashed run, Spark's .crc and _SUCCESS.
    later = maintain(ref, now + timedelta(days=10), timedelta(days=7), timedelta(days=3))
    assert (later.snapshots_expired, later.snapshots_kept) == (1, 1)
    assert later.files_deleted > 0
    assert later.bytes_deleted > 0
    table = open_table(ref, create=False)
    assert table is not None
    on_disk = {"file://" + str(p) for p in (output / f"stream={STREAM}").rglob("*") if p.is_file()}
    assert on_disk == referenced_files(table), "an orphan is left, or a file read is gone"
    assert hour_nine <= on_disk
    assert _rows(ref) == expected
    # ... and the dropped copies of hours a newer run made since go too, and those of
    # hours whose entry expired with its snapshot (09, the first run's): no run reads an
    # hour's index without its entry.
    live = {(entry.run_id, f"dt={h[:10]}/hour={h[11:]}") for h, entry in published(table).items()}
    left = _dropped(output)
    assert left
    assert left <= live
    assert {run for run, _ in left} == {second.run_id}
    assert later.dropped_deleted > 0
    # The first run still made hour 09: its manifest stays, and with the snapshot that
    # named it expired, the analysis finds the hour's run through it.
    manifests = {p.stem for p in (output / "_manifests" / f"stream={STREAM}").iterdir()}
    assert manifests == {first.run_id, second.run_id}
    runs = hour_runs(ref, LocalFilesystem(), DAY)
    assert runs["2026-11-21T09"] == first.run_id
    assert runs["2026-11-21T10"] == second.run_id


def _dropped(output: Path) -> set[tuple[str, str]]:
    """(run, ``dt=…/hour=…``) of every dropped-copy file."""
    root = output / "_dropped" / f"stream={STREAM}"
    found = set()
    for path in root.rglob("*.parquet"):
        run, dt, hour = path.relative_to(root).parts[:3]
        found.add((run, f"{dt}/{hour}"))
    return found


def _rows(ref: TableRef) -> dict[tuple[str, int, int], str | None]:
    table = open_table(ref, create=False)
    assert table is not None
    columns = ("shard_id", "sequence_number", "subsequence_number", "event_id")
    found = table.scan(selected_fields=columns).to_arrow().to_pylist()
    keyed = {
        (r["shard_id"], int(r["sequence_number"]), r["subsequence_number"]): r["event_id"]
        for r in found
    }
    assert len(keyed) == len(found), "a record is in the table twice"
    return keyed
