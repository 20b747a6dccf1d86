"""The analyse job's own counts on rows built here: volume in buckets the span of the data
chooses, and producer sequence reorders counted where Kinesis keeps an order.

The report's drawing of them is tests/sparkjobs/test_report.py's (no Spark there).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sparkjobs.analysis.analyse import AnalyseJob, _base, _gaps, _volume
from sparkjobs.table.schema import COMPACTED
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

START = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
JOB = AnalyseJob(
    "file:///compacted",
    "orders",
    Window.parse("2024-05-01"),
    "file:///reports",
    sequence_pointer="/seq",
)


def _base_of(spark: SparkSession, rows: list[tuple[str, str, str, int, float, int]]) -> DataFrame:
    """Compacted rows from (partition key, shard, sequence number, subsequence, seconds
    after START it arrived, producer sequence), as the job's base columns."""
    frame = spark.createDataFrame(
        [
            (
                "orders",
                shard,
                sequence,
                subsequence,
                key,
                START + timedelta(seconds=after),
                START + timedelta(seconds=after + 1),
                None,
                json.dumps({"seq": seq}),
            )
            for key, shard, sequence, subsequence, after, seq in rows
        ],
        COMPACTED,
    )
    return _base(frame, JOB)


def test_a_one_minute_window_is_counted_per_second(spark: SparkSession) -> None:
    """Records over one minute come back in one-second buckets, not as one minute; the
    Parquet table stays per minute."""
    rows = [
        ("k", "shardId-0", str(1_000 + i), 0, s + i / 100, i)
        for s in range(60)
        for i in range(1 + s % 5)
    ]
    base = _base_of(spark, rows)
    try:
        table, points, seconds = _volume(base)
        assert seconds == 1
        assert len(points) == 60
        assert [p.records for p in points] == [1 + s % 5 for s in range(60)]
        assert points[1].start == START + timedelta(seconds=1)
        assert table.count() == 1  # one minute, one shard
    finally:
        base.unpersist()


def test_reorders_are_counted_within_a_shard_in_sequence_number_order(
    spark: SparkSession,
) -> None:
    """Kinesis orders a shard by sequence number; arrival times are approximate (equal,
    or even earlier for a later record) and say nothing across shards. Only a producer
    whose number goes down between two consecutive records of one shard has a reorder."""
    rows = [
        # Equal arrivals; sequence numbers ordered as numbers ("99" < "100").
        ("tied", "shardId-0", "99", 0, 1.0, 1),
        ("tied", "shardId-0", "100", 0, 1.0, 2),
        ("tied", "shardId-0", "101", 0, 1.0, 3),
        # The later record of the shard carries an earlier arrival time.
        ("skewed", "shardId-0", "200", 0, 2.005, 1),
        ("skewed", "shardId-0", "201", 0, 2.003, 2),
        # One producer in two shards (a KPL aggregate routed by another key) at one time.
        ("split", "shardId-0", "300", 0, 3.0, 1),
        ("split", "shardId-0", "301", 0, 3.0, 3),
        ("split", "shardId-1", "302", 0, 3.0, 2),
        # Aggregated records share a sequence number: subsequence orders them.
        ("packed", "shardId-0", "400", 1, 4.0, 2),
        ("packed", "shardId-0", "400", 0, 4.0, 1),
        # A real reorder: 2 then 1 in the shard, and a gap (4, 5 missing).
        ("late", "shardId-1", "500", 0, 5.0, 2),
        ("late", "shardId-1", "501", 0, 5.1, 1),
        ("late", "shardId-1", "502", 0, 5.2, 3),
        ("late", "shardId-1", "503", 0, 5.3, 6),
    ]
    base = _base_of(spark, rows)
    try:
        table, found = _gaps(base)
        counts = {r["producer"]: (r["reorders"], r["gaps"], r["missing"]) for r in table.collect()}
    finally:
        base.unpersist()
    assert counts == {
        "tied": (0, 0, 0),
        "skewed": (0, 0, 0),
        "split": (0, 0, 0),
        "packed": (0, 0, 0),
        "late": (1, 1, 2),
    }
    assert [(g.producer, g.reorders, g.missing) for g in found] == [("late", 1, 2)]
