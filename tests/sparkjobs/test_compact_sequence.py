"""Producer duplicates without an event id, by (partition key, producer sequence): the
Spark job against :mod:`sparkjobs.compaction.dedupe`'s rule, day by day through each hour's index
and in one run of both days, and the counts kept apart from event-id duplicates."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.compaction.dedupe import Copy, fates
from sparkjobs.table.compacted import current_files
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STREAM = "orders"
SHARD = "shardId-000000000000"
DAYS = (Window.parse("2026-11-21"), Window.parse("2026-11-22"))
POINTER = "/meta/seq"


def _line(seq: int, when: str, key: str, number: Any, event: str | None = None) -> dict[str, Any]:
    """A landed line whose payload carries the producer's number at ``/meta/seq``
    (``number`` None: the payload has none)."""
    line: dict[str, Any] = {
        "stream": STREAM,
        "shard_id": SHARD,
        "sequence_number": str(seq),
        "subsequence_number": 0,
        "partition_key": key,
        "arrival_ts": f"2026-11-{when}.000Z",
    }
    if event is not None:
        line["event_id"] = event
    line["data"] = {"meta": {"seq": number}, "n": seq} if number is not None else {"n": seq}
    return line


ARCHIVE = [
    ("a", [_line(1, "21T02:00:00", "p", 1), _line(2, "21T02:00:01", "q", 1)]),
    # p's 1 again at 22:00 (a retry: dropped), and once more at 12:00 the next day: 34 h
    # after the kept copy, 14 h after the dropped one, so a retry too, which only the
    # dropped copy in the index can say.
    ("b", [_line(3, "21T22:00:00", "p", 1), _line(4, "21T22:00:02", "p", "2")]),
    ("b2", [_line(4, "21T22:00:02", "p", "2")]),  # a transport copy of line 4
    ("c", [_line(5, "22T12:00:00", "p", 1), _line(6, "22T12:00:01", "q", 2)]),
    # p's 2 as a number this time (the same text as "2"): a retry; an id wins over a
    # number; a record without a number is judged by its position only.
    ("d", [_line(7, "22T21:00:00", "p", 2), _line(8, "22T21:00:01", "q", 2, event="x")]),
    ("e", [_line(9, "22T21:30:00", "q", None), _line(10, "22T21:30:01", "q", None)]),
]


def _land(root: Path) -> None:
    for name, lines in ARCHIVE:
        at = lines[0]["arrival_ts"]
        folder = root / f"stream={STREAM}/dt={at[:10]}/hour={at[11:13]}"
        folder = folder / f"minute={at[14:16]}/shard={SHARD}"
        folder.mkdir(parents=True, exist_ok=True)
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        (folder / f"{name}.jsonl.gz").write_bytes(gzip.compress(body))


def _model() -> dict[str, set[int]]:
    """Sequence numbers (Kinesis') by the rule's cause, over every copy."""
    copies = {
        Copy(
            SHARD,
            line["sequence_number"],
            0,
            datetime.fromisoformat(line["arrival_ts"].replace("Z", "+00:00")),
            line.get("event_id"),
            name,
            None if "meta" not in line["data"] else str(line["data"]["meta"]["seq"]),
            line["partition_key"],
        )
        for name, lines in ARCHIVE
        for line in lines
    }
    found: dict[str, set[int]] = {}
    for copy, cause in fates(copies, timedelta(days=1)).items():
        found.setdefault(cause, set()).add(int(copy.sequence_number))
    return found


def _job(archive: Path, output: Path, window: Window) -> CompactJob:
    return CompactJob(archive.as_uri(), STREAM, window, output.as_uri(), sequence_pointer=POINTER)


def _published(output: Path) -> list[tuple[int, Any]]:
    ref = table_ref(output.as_uri(), STREAM)
    files = [u.removeprefix("file://") for w in DAYS for u in current_files(ref, w)]
    return sorted(
        (int(seq), json.loads(data))
        for seq, data in duckdb.execute(
            f"select sequence_number, data from read_parquet({files})"
        ).fetchall()
    )


def test_sequence_duplicates_day_by_day_and_in_one_run(spark: SparkSession, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    _land(archive)
    model = _model()
    assert model["kept"] == {1, 2, 4, 6, 8, 9, 10}
    assert model["sequence"] == {3, 5, 7}
    assert model["transport"] == {4}

    daily = tmp_path / "daily"
    first = compact(spark, _job(archive, daily, DAYS[0]))
    second = compact(spark, _job(archive, daily, DAYS[1]))
    assert second.indexed_hours == ["2026-11-21T02", "2026-11-21T22"]
    assert second.lookback_files == 0
    assert (first.total("sequence"), first.total("transport")) == (1, 1)
    assert (second.total("sequence"), second.total("producer")) == (2, 0)
    kept = {seq for seq, _ in _published(daily)}
    assert kept == model["kept"]

    # The same archive in one run of both days publishes the same rows, payloads as landed.
    both = tmp_path / "both"
    compact(spark, _job(archive, both, Window(DAYS[0].start, 48)))
    assert _published(both) == _published(daily)


def test_without_the_pointer_records_without_an_id_are_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The rule is opt-in: no pointer, no sequence duplicates."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    _land(archive)
    job = CompactJob(archive.as_uri(), STREAM, Window(DAYS[0].start, 48), output.as_uri())
    run = compact(spark, job)
    assert (run.total("sequence"), run.total("transport"), run.total("producer")) == (0, 1, 0)
    assert {seq for seq, _ in _published(output)} == set(range(1, 11))
