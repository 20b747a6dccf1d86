"""The DuckDB compaction baseline (bench/compaction_duckdb.py) against generated truths.

Two generators: bench/archives.py (the lander's own writer, KPL aggregates) with its
bookkeeping, and bench/prodlike.py (an independent writer, odd payloads, retries hours
apart, late objects) with the model of bench/prodlike_truth.py, compared row for row
and byte for byte. DuckDB only: no Spark here.
"""

from __future__ import annotations

import gzip
import json
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from bench.archives import Truth, generate_archive, malformed, truncate
from bench.compaction_duckdb import DuckResult, compact_with_duckdb
from bench.prodlike import DAY as PRODLIKE_DAY
from bench.prodlike import STREAM, ProdArchive
from bench.prodlike_truth import Readout, Row, WindowTruth, read_archive, truth
from tests.support.landed import malformed_variants

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
    made = archive(tmp_path / "archive", event_ids=event_ids)
    out = tmp_path / "out"
    result = compact_with_duckdb(tmp_path / "archive", made.stream, DAY, out)
    assert result.rows_in == made.readable_lines
    assert result.rows_invalid == 0
    assert result.rows_out == len(made.kept)
    assert result.transport_duplicates == made.transport_duplicates
    assert result.producer_duplicates == made.producer_duplicates
    assert sorted(result.files) == sorted(out.rglob("*.parquet"))
    with written(out) as connection:
        rows = connection.execute(
            "SELECT shard_id, sequence_number, subsequence_number, event_id, data FROM rows"
        ).fetchall()
        assert {(shard, int(seq), sub): event_id for shard, seq, sub, event_id, _ in rows} == (
            made.kept
        )
        assert {(shard, int(seq), sub): data for shard, seq, sub, _, data in rows} == {
            position: data for position, data in landed_data(made).items() if position in made.kept
        }
        per_hour = connection.execute(
            "SELECT dt::VARCHAR, hour::INT, count(*) FROM rows GROUP BY ALL"
        ).fetchall()
        assert {hour: count for _, hour, count in per_hour} == made.kept_per_hour
        assert {dt for dt, _, _ in per_hour} == {DAY.isoformat()}
        # Microseconds, adjusted to UTC: what Spark reads as a TimestampType.
        (logical,) = connection.execute(
            f"SELECT DISTINCT logical_type FROM parquet_schema('{out}/*/*/*.parquet') "
            "WHERE name = 'arrival_ts'"
        ).fetchone() or (None,)
        assert "isAdjustedToUTC=1" in str(logical)
        assert "MICROS=MicroSeconds()" in str(logical)


def test_duckdb_sets_aside_lines_that_are_not_records(tmp_path: Path) -> None:
    """Lines that are not JSON or not records are counted, not kept."""
    made = archive(tmp_path / "archive")
    malformed(made, tmp_path / "archive", hour=7, good=20)
    result = compact_with_duckdb(tmp_path / "archive", made.stream, DAY, tmp_path / "out")
    assert result.rows_out == len(made.kept)
    assert result.rows_in - result.rows_invalid == made.readable_lines
    assert result.rows_invalid == made.bad_lines
    assert result.transport_duplicates == made.transport_duplicates
    assert result.producer_duplicates == made.producer_duplicates


def test_duckdb_fails_on_a_truncated_gzip(tmp_path: Path) -> None:
    """Why the baseline needs an undamaged archive: one cut gzip fails the whole query."""
    made = archive(tmp_path / "archive")
    truncate(made, made.files[0], 0.5)
    with pytest.raises(duckdb.IOException, match="GZIP"):
        compact_with_duckdb(tmp_path / "archive", made.stream, DAY, tmp_path / "out")


# ---------------------------------------------------------------- the production-like archive


def compacted_rows(out: Path) -> list[Row]:
    """The published rows, sorted as the truth sorts them, ``data`` as UTF-8 bytes."""
    with written(out) as connection:
        found = connection.execute(
            "SELECT shard_id, sequence_number, subsequence_number, event_id, data FROM rows"
        ).fetchall()
    rows = [
        Row(shard, seq, sub, event_id, data.encode()) for shard, seq, sub, event_id, data in found
    ]
    return sorted(rows, key=lambda row: (row.shard_id, len(row.sequence_number), *row[1:3]))


def assert_is_the_truth(result: DuckResult, out: Path, expected: WindowTruth) -> None:
    """Counts per hour, payload bytes and every row, byte for byte."""
    assert result.hours == {
        hour: (counts.kept, counts.transport, counts.producer, counts.malformed)
        for hour, counts in expected.hours.items()
    }
    assert result.rows_out == expected.kept
    assert result.rows_in == expected.records + expected.malformed
    assert result.payload_bytes == expected.payload_bytes
    assert compacted_rows(out) == expected.rows


@pytest.mark.parametrize("horizon", [timedelta(days=1), timedelta(hours=1)])
def test_duckdb_is_the_model_on_a_production_like_day(tmp_path: Path, horizon: timedelta) -> None:
    """Both phases of the small archive, without its damaged objects: the truth exactly."""
    made = ProdArchive(tmp_path / "archive", "small", seed=3, damaged=False)
    made.write_phase(1)
    made.write_phase(2)
    expected = truth(read_archive(made.root, STREAM), PRODLIKE_DAY.isoformat(), horizon)
    assert expected.transport > 0
    assert expected.producer > 0
    out = tmp_path / "out"
    result = compact_with_duckdb(made.root, STREAM, PRODLIKE_DAY, out, horizon=horizon)
    assert_is_the_truth(result, out, expected)


def test_duckdb_before_and_after_late_objects(tmp_path: Path) -> None:
    """Phase 1 compacted, phase 2 landed, compacted again: the truth each time."""
    made = ProdArchive(tmp_path / "archive", "small", seed=4, damaged=False)
    window = PRODLIKE_DAY.isoformat()
    made.write_phase(1)
    before = truth(read_archive(made.root, STREAM), window)
    result = compact_with_duckdb(made.root, STREAM, PRODLIKE_DAY, tmp_path / "one")
    assert_is_the_truth(result, tmp_path / "one", before)
    made.write_phase(2)
    after = truth(read_archive(made.root, STREAM), window)
    assert after.rows != before.rows
    result = compact_with_duckdb(made.root, STREAM, PRODLIKE_DAY, tmp_path / "two")
    assert_is_the_truth(result, tmp_path / "two", after)


def _land(root: Path, rel: str, lines: list[bytes]) -> None:
    path = root / f"stream={STREAM}" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))


def _line(sequence: str, arrival: str, event_id: str | None, data: bytes) -> bytes:
    head = {
        "stream": STREAM,
        "shard_id": "shardId-000000000000",
        "sequence_number": sequence,
        "subsequence_number": 0,
        "partition_key": "k",
        "arrival_ts": arrival,
        "event_id": event_id,
    }
    return json.dumps(head, separators=(",", ":")).encode()[:-1] + b',"data":' + data + b"}"


def test_duckdb_reads_the_horizon_before_the_day(tmp_path: Path) -> None:
    """A retry just after midnight of an event landed the evening before is dropped (its
    original is not the day's to write); with a shorter horizon it is kept."""
    root = tmp_path / "archive"
    day = date(2026, 11, 22)
    _land(
        root,
        "dt=2026-11-21/hour=23/minute=30/shard=shardId-000000000000/1-1.jsonl.gz",
        [_line("1", "2026-11-21T23:30:00.000Z", "e", b'{"n":1}')],
    )
    _land(
        root,
        "dt=2026-11-22/hour=00/minute=10/shard=shardId-000000000000/2-3.jsonl.gz",
        [
            _line("2", "2026-11-22T00:10:00.000Z", "e", b'{"n":1}'),
            _line("3", "2026-11-22T00:10:00.001Z", "f", b'"f"'),
        ],
    )
    for horizon, kept in ((timedelta(days=1), ["3"]), (timedelta(minutes=30), ["2", "3"])):
        out = tmp_path / f"out-{horizon.seconds}"
        result = compact_with_duckdb(root, STREAM, day, out, horizon=horizon)
        expected = truth(read_archive(root, STREAM), day.isoformat(), horizon)
        assert [row.sequence_number for row in expected.rows] == kept
        assert_is_the_truth(result, out, expected)
        assert {path.parent.parent.name for path in result.files} == {"dt=2026-11-22"}


def test_duckdb_slices_data_and_sets_aside_lines_as_the_model_does(tmp_path: Path) -> None:
    """Payloads kept byte for byte; each kind of malformed line counted as the model does."""
    root = tmp_path / "archive"
    good = _line("7", "2026-11-21T05:00:00.000Z", None, b'{"a": 1E+2, "b":"}"}')
    marker = _line("8", "2026-11-21T05:00:01.000Z", 'x","data":"y', b'"\\u00e9 \xc3\xa9"')
    bad = malformed_variants(good)
    rel = "dt=2026-11-21/hour=05/minute=00/shard=shardId-000000000000/7-8.jsonl.gz"
    _land(root, rel, [good, b"", b"  ", *bad, good, marker])
    expected = truth(read_archive(root, STREAM), "2026-11-21")
    assert expected.malformed == len(bad)
    assert expected.transport == 1
    out = tmp_path / "out"
    result = compact_with_duckdb(root, STREAM, PRODLIKE_DAY, out)
    assert_is_the_truth(result, out, expected)
    assert [row.event_id for row in expected.rows] == [None, 'x","data":"y']


def test_the_model_reads_what_the_generator_wrote(tmp_path: Path) -> None:
    """The prodlike truth over a bench/archives day agrees with that generator's books."""
    made = archive(tmp_path / "archive")
    found: Readout = read_archive(tmp_path / "archive", made.stream)
    expected = truth(found, DAY.isoformat())
    assert expected.kept == len(made.kept)
    assert expected.transport == made.transport_duplicates
    assert expected.producer == made.producer_duplicates
