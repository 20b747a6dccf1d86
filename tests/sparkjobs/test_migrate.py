"""`lander migrate-pointers`: an output published by pointer files becomes the table.

The old layout is rebuilt from a real run: the run's Parquet copied under
``_runs/{run_id}/``, its manifest under ``stream=S/_manifests/``, a day pointer naming
every hour, and an hour pointer listed earlier that the old readers would not have
used (it must not be imported either).
"""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.archives import generate_archive
from consumer import cli
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.io import LocalFilesystem
from sparkjobs.table.compacted import hour_runs
from sparkjobs.table.manifest import manifest_uri
from sparkjobs.table.migrate import PointerEntry, migrate, parse_pointer, resolve
from sparkjobs.table.publish import HourEntry
from sparkjobs.table.table import files_of, open_table, published
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STREAM = "orders"
DAY = Window.parse("2026-11-21")


def _pointer(run_id: str, hours: list[dict[str, Any]]) -> bytes:
    body = {"format": 1, "stream": STREAM, "window": "2026-11-21", "run_id": run_id}
    return json.dumps({**body, "hours": hours}).encode()


def test_the_old_readers_rule_picks_each_hour() -> None:
    def found(hour: str, listed: str, run: str) -> PointerEntry:
        return PointerEntry(HourEntry(hour, run, listed, "d", 1, 1), (f"_runs/{run}/x",))

    older, newer = found("h1", "t1", "r1"), found("h1", "t2", "r2")
    other = found("h2", "t1", "r1")
    assert resolve([newer, older, other]) == {"h1": newer, "h2": other}
    with pytest.raises(ValueError, match="format 1"):
        parse_pointer(b'{"format": 2, "hours": []}')


@pytest.mark.spark
def test_a_pointer_published_day_is_imported_and_then_up_to_date(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive, made, old = tmp_path / "archive", tmp_path / "made", tmp_path / "old"
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9, 10], shards=2,
        records_per_minute=6, records_per_file=9, transport_duplicate_share=0.1, seed=5,
    )  # fmt: skip
    # Files as a release before typed payload columns wrote them (the pointer era's).
    job = CompactJob(archive.as_uri(), STREAM, DAY, made.as_uri(), payload_schema="off")
    run = compact(spark, job)
    table = open_table(table_ref(made.as_uri(), STREAM), create=False)
    assert table is not None
    entries = published(table)

    # The old layout: the run's files under _runs/, its manifest, its pointers.
    stream_dir = old / f"stream={STREAM}"
    hours = []
    for hour, entry in sorted(entries.items()):
        files = []
        for uri in files_of(table, [hour]):
            rel = f"_runs/{run.run_id}/" + uri.split(f"/data/{run.run_id}/", 1)[1]
            (stream_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            _as_optional(uri.removeprefix("file://"), stream_dir / rel)
            files.append({"path": rel, "bytes": (stream_dir / rel).stat().st_size})
        hours.append({**_entry_json(entry), "files": files})
    (stream_dir / "_published" / "dt=2026-11-21").mkdir(parents=True)
    (stream_dir / "_published" / "dt=2026-11-21.json").write_bytes(_pointer(run.run_id, hours))
    stale = {**hours[10], "listed_at": "2000-01-01T00:00:00+00:00", "run_id": "ancient"}
    stale["files"] = [{"path": "_runs/ancient/gone.parquet", "bytes": 1}]
    (stream_dir / "_published" / "dt=2026-11-21" / "hour=10.json").write_bytes(
        _pointer("ancient", [stale])
    )
    (stream_dir / "_manifests").mkdir()
    old_manifest = Path(manifest_uri(made.as_uri(), STREAM, run.run_id).removeprefix("file://"))
    shutil.copy(old_manifest, stream_dir / "_manifests" / f"{run.run_id}.json")

    ref = table_ref(old.as_uri(), STREAM)
    first = migrate(ref, LocalFilesystem())
    assert (first.pointers, first.hours, len(first.imported)) == (2, 24, 24)
    imported = open_table(ref, create=False)
    assert imported is not None
    # Its files declare no column required: the table's required ones became optional.
    assert not [f.name for f in imported.schema().fields if f.required]
    columns = ("shard_id", "sequence_number", "subsequence_number", "event_id")
    rows = imported.scan(selected_fields=columns).to_arrow().to_pylist()
    keyed = {(r["shard_id"], int(r["sequence_number"]), r["subsequence_number"]): r["event_id"]
             for r in rows}  # fmt: skip
    assert len(keyed) == len(rows)
    assert keyed == truth.kept
    assert hour_runs(ref, LocalFilesystem(), DAY)["2026-11-21T10"] == run.run_id
    assert Path(manifest_uri(old.as_uri(), STREAM, run.run_id).removeprefix("file://")).is_file()

    again = migrate(ref, LocalFilesystem())
    assert (again.imported, len(again.kept)) == ([], 24)
    command = ["migrate-pointers", "--stream", STREAM, "--compacted", old.as_uri()]
    assert cli.main(command) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("lander.")]
    assert said == [
        "lander.orders: 2 pointer files, 24 hours; imported 0 (0 files), already in the table 24"
    ]
    after = compact(spark, CompactJob(archive.as_uri(), STREAM, DAY, old.as_uri()))
    assert after.status == "up-to-date"


def _as_optional(source: str, target: Path) -> None:
    """A copy of a data file whose columns are all optional, as files were written
    before the table required any (field ids kept)."""
    rows = pq.read_table(source)
    fields = [field.with_nullable(True) for field in rows.schema]
    pq.write_table(rows.cast(pa.schema(fields, metadata=rows.schema.metadata)), target)


def _entry_json(entry: HourEntry) -> dict[str, Any]:
    return {
        "hour": entry.hour,
        "run_id": entry.run_id,
        "listed_at": entry.listed_at,
        "inputs_digest": entry.inputs_digest,
        "inputs": entry.inputs,
        "rows": entry.rows,
    }
