"""The DuckDB compaction baseline (bench/compaction_duckdb.py) against a generated truth."""

from __future__ import annotations

import gzip
import json
from datetime import date
from pathlib import Path

import duckdb
import pytest

from bench.archives import Truth, generate_archive, malformed, truncate
from bench.compaction_duckdb import compact_with_duckdb

DAY = date(2026, 11, 22)


def archive(root: Path, *, event_ids: bool = True) -> Truth:
    """Two hours, two shards, aggregates, transport copies and re-sends across hours."""
    return generate_archive(
        root,
        day=DAY,
        hours=[6, 7],
        shards=2,
        records_per_minute=20,
        records_per_file=8,
        event_ids=event_ids,
        transport_duplicate_share=0.1,
        producer_duplicate_share=0.05,
        aggregated_share=0.3,
        seed=11,
    )


def landed_data(truth: Truth) -> dict[tuple[str, int, int], str]:
    """The payload text of every landed record, as it is in the lines."""
    data = {}
    for path in truth.files:
        with gzip.open(path) as lines:
            for line in lines:
                document = json.loads(line)
                position = (
                    document["shard_id"],
                    int(document["sequence_number"]),
                    document["subsequence_number"],
                )
                data[position] = line[line.index(b',"data":') + len(b',"data":') : -2].decode()
    return data


def written(out: Path) -> duckdb.DuckDBPyConnection:
    """A connection with the compacted rows as view ``rows`` (partition columns included)."""
    connection = duckdb.connect()
    connection.execute(
        f"CREATE VIEW rows AS SELECT * FROM read_parquet('{out}/*/*/*.parquet', "
        "hive_partitioning = true)"
    )
    return connection


@pytest.mark.parametrize("event_ids", [True, False])
def test_duckdb_compaction_matches_the_truth(tmp_path: Path, event_ids: bool) -> None:
    """Rows in, rows out and drops by cause equal the truth; the kept rows are the truth's."""
    truth = archive(tmp_path / "archive", event_ids=event_ids)
    out = tmp_path / "out"
    result = compact_with_duckdb(tmp_path / "archive", truth.stream, DAY, out)
    assert result.rows_in == truth.readable_lines
    assert result.rows_invalid == 0
    assert result.rows_out == len(truth.kept)
    assert result.transport_duplicates == truth.transport_duplicates
    assert result.producer_duplicates == truth.producer_duplicates
    assert sorted(result.files) == sorted(out.rglob("*.parquet"))
    with written(out) as connection:
        rows = connection.execute(
            "SELECT shard_id, sequence_number, subsequence_number, event_id, data FROM rows"
        ).fetchall()
        assert {(shard, int(seq), sub): event_id for shard, seq, sub, event_id, _ in rows} == (
            truth.kept
        )
        assert {(shard, int(seq), sub): data for shard, seq, sub, _, data in rows} == {
            position: data
            for position, data in landed_data(truth).items()
            if position in truth.kept
        }
        per_hour = connection.execute(
            "SELECT dt::VARCHAR, hour::INT, count(*) FROM rows GROUP BY ALL"
        ).fetchall()
        assert {hour: count for _, hour, count in per_hour} == truth.kept_per_hour
        assert {dt for dt, _, _ in per_hour} == {DAY.isoformat()}
        # Microseconds, adjusted to UTC: what Spark reads as a TimestampType.
        (logical,) = connection.execute(
            f"SELECT DISTINCT logical_type FROM parquet_schema('{out}/*/*/*.parquet') "
            "WHERE name = 'arrival_ts'"
        ).fetchone() or (None,)
        assert "isAdjustedToUTC=1" in str(logical)
        assert "MICROS=MicroSeconds()" in str(logical)


def test_duckdb_sets_aside_lines_that_are_not_records(tmp_path: Path) -> None:
    """With ignore_errors, lines that are not JSON or not records are counted, not kept."""
    truth = archive(tmp_path / "archive")
    malformed(truth, tmp_path / "archive", hour=7, good=20)
    result = compact_with_duckdb(
        tmp_path / "archive", truth.stream, DAY, tmp_path / "out", ignore_errors=True
    )
    assert result.rows_out == len(truth.kept)
    assert result.rows_in - result.rows_invalid == truth.readable_lines
    assert result.rows_invalid == truth.bad_lines
    assert result.transport_duplicates == truth.transport_duplicates
    assert result.producer_duplicates == truth.producer_duplicates


def test_duckdb_fails_on_a_truncated_gzip(tmp_path: Path) -> None:
    """Why the baseline needs an undamaged archive: one cut gzip fails the whole query."""
    truth = archive(tmp_path / "archive")
    truncate(truth, truth.files[0], 0.5)
    with pytest.raises(duckdb.IOException, match="GZIP"):
        compact_with_duckdb(
            tmp_path / "archive", truth.stream, DAY, tmp_path / "out", ignore_errors=True
        )
