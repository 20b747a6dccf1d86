"""The compaction job done by DuckDB, in-process: the baseline for the Spark compaction.

The same job as the Spark one, on the same archive:

1. Read every ``stream={stream}/dt={day}/hour=*/minute=*/shard=*/*.jsonl.gz`` with an
   explicit schema (no inference pass), keeping each row's file name.
2. Set aside rows that are not landed records: no shard, a sequence number that is not
   1-128 digits, no subsequence, or an ``arrival_ts`` that is not ISO-8601 UTC with
   milliseconds.
3. Dedupe in one window step. The key is the event id when the line has one, else the
   position; within a key rows are ordered by arrival, shard, sequence number (as a
   number: by length, then text), subsequence and file name, and the first is kept.
   A dropped row whose previous row has the same position is a transport duplicate
   (the same record landed twice); any other is a producer duplicate (a re-send).
4. Write Parquet partitioned by ``dt=YYYY-MM-DD/hour=HH`` of the arrival (UTC),
   timestamps as microseconds UTC, snappy by default (the Spark job's default).

Not done here: the Spark job's ``landed_ts`` column (the file's modification time,
which ``read_json`` does not expose).

DuckDB fails the whole query on a file whose gzip stream is truncated, corrupt or not
gzip (``ignore_errors`` covers JSON errors only), so this baseline runs on undamaged
archives; ``ignore_errors=True`` lets it read lines that are not JSON (as rows of
NULLs, which step 2 sets aside).

The caller measures CPU; this module measures only wall time.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb

from consumer.archive.layout import day_glob
from consumer.sequence import MAX_SEQUENCE_DIGITS

COLUMNS = {
    "stream": "VARCHAR",
    "shard_id": "VARCHAR",
    "sequence_number": "VARCHAR",
    "subsequence_number": "BIGINT",
    "partition_key": "VARCHAR",
    "arrival_ts": "VARCHAR",
    "event_id": "VARCHAR",
    "data": "VARCHAR",
}
"""A landed line. ``data`` is read as text, as in the Spark job, but DuckDB re-serialises
the JSON: key order is kept, whitespace dropped, numbers and escapes normalised (``1e3``
becomes ``1000.0``). Compact payloads like the generator's come out as landed."""

ARRIVAL_FORMAT = "%Y-%m-%dT%H:%M:%S.%gZ"

_RANK = f"""
CREATE TEMP TABLE ranked AS
WITH landed AS (
    SELECT *, try_strptime(arrival_ts, '{ARRIVAL_FORMAT}') AS arrival
    FROM read_json(
        $files,
        columns = {{{", ".join(f"'{name}': '{kind}'" for name, kind in COLUMNS.items())}}},
        format = 'newline_delimited',
        compression = 'gzip',
        filename = true,
        ignore_errors = $ignore_errors
    )
),
checked AS (
    SELECT *,
        shard_id IS NOT NULL
        AND regexp_full_match(coalesce(sequence_number, ''), '[0-9]{{1,{MAX_SEQUENCE_DIGITS}}}')
        AND subsequence_number IS NOT NULL
        AND arrival IS NOT NULL AS ok
    FROM landed
)
SELECT
    stream, shard_id, sequence_number, subsequence_number, partition_key,
    arrival::TIMESTAMPTZ AS arrival_ts, event_id, data, ok,
    row_number() OVER w AS rank,
    coalesce(
        lag(shard_id) OVER w = shard_id
        AND lag(sequence_number) OVER w = sequence_number
        AND lag(subsequence_number) OVER w = subsequence_number,
        false
    ) AS same_position
FROM checked
WINDOW w AS (
    -- Rows that are not records share one (NULL) key: ranked, but never counted.
    PARTITION BY CASE WHEN ok THEN coalesce(
        'e' || event_id,
        'p' || shard_id || '/' || sequence_number || '/' || subsequence_number
    ) END
    -- (length, text) is integer order for digit strings, as in the Spark job; cheaper
    -- than sorting on lpad(sequence_number, 128, '0').
    ORDER BY arrival, shard_id, length(sequence_number), sequence_number,
        subsequence_number, filename
)
"""

_OUTPUT = """
SELECT
    stream, shard_id, sequence_number, subsequence_number, partition_key, arrival_ts,
    event_id, data,
    strftime(arrival_ts, '%Y-%m-%d') AS dt,
    strftime(arrival_ts, '%H') AS hour
FROM ranked
WHERE ok AND rank = 1
"""

_COUNTS = """
SELECT
    count(*),
    count(*) FILTER (NOT ok),
    count(*) FILTER (ok AND rank = 1),
    count(*) FILTER (ok AND rank > 1 AND same_position),
    count(*) FILTER (ok AND rank > 1 AND NOT same_position)
FROM ranked
"""


@dataclass(frozen=True, slots=True)
class DuckResult:
    """What one DuckDB compaction read, dropped and wrote."""

    rows_in: int
    """Rows read, records or not."""
    rows_invalid: int
    """Rows that are not landed records (set aside)."""
    rows_out: int
    transport_duplicates: int
    producer_duplicates: int
    files: list[Path]
    """The Parquet files written."""
    wall_seconds: float


def _literal(text: str) -> str:
    """A SQL string literal (COPY TO takes no parameter)."""
    return "'" + text.replace("'", "''") + "'"


def compact_with_duckdb(
    archive: Path,
    stream: str,
    day: date,
    out: Path,
    *,
    threads: int = 2,
    ignore_errors: bool = False,
    compression: str = "snappy",
) -> DuckResult:
    """Compact one day of ``stream`` from the archive at ``archive`` into ``out``.

    ``out`` must not exist yet, or be empty. ``compression``: a DuckDB Parquet codec
    (snappy, zstd, gzip, uncompressed).
    """
    files = archive / day_glob(stream, day)
    started = time.perf_counter()
    # A spill, if any, goes to a directory of ours rather than DuckDB's default (.tmp
    # under the current directory).
    with tempfile.TemporaryDirectory(prefix="compaction-duckdb-") as spill:
        connection = duckdb.connect(config={"threads": threads, "temp_directory": spill})
        try:
            connection.execute("SET TimeZone = 'UTC'")
            # Output order is not part of the job; not keeping it saves memory.
            connection.execute("SET preserve_insertion_order = false")
            connection.execute(_RANK, {"files": str(files), "ignore_errors": ignore_errors})
            written = connection.execute(
                f"COPY ({_OUTPUT}) TO {_literal(str(out))} "
                f"(FORMAT parquet, PARTITION_BY (dt, hour), COMPRESSION {_literal(compression)}, "
                "RETURN_FILES true)"
            ).fetchall()
            counts = connection.execute(_COUNTS).fetchone()
        finally:
            connection.close()
    wall = time.perf_counter() - started
    assert counts is not None
    rows_in, invalid, rows_out, transport, producer = (int(value) for value in counts)
    ((written_rows, paths),) = written
    assert written_rows == rows_out, (written_rows, rows_out)
    return DuckResult(
        rows_in=rows_in,
        rows_invalid=invalid,
        rows_out=rows_out,
        transport_duplicates=transport,
        producer_duplicates=producer,
        files=[Path(path) for path in paths],
        wall_seconds=wall,
    )
