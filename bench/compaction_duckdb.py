"""The compaction job done by DuckDB, in-process: the baseline for the Spark compaction.

The same job as the Spark one, on the same archive, following the model of
:mod:`bench.prodlike_truth`:

1. Read every landed object of the day (``stream={stream}/dt={day}/hour=*/…``) and of
   the hours of the dedupe horizon before it as raw text: ``read_csv`` with one
   VARCHAR column, a NUL delimiter and no quote or escape, so each line comes back as
   written (JSON text holds no raw NUL, CR or control character, so nothing in a
   landed line is interpreted). Each row keeps its object's key below the stream.
2. Slice each line: ``data`` is the text after the first ``,"data":`` up to, not
   including, the final ``}``, never parsed; the header before the marker, closed with
   ``}``, is parsed once with DuckDB's JSON functions. A line without the marker or the
   final ``}``, with an empty payload, a header that is not a JSON object, another
   stream, a field of the wrong type, a sequence number that is not 1-128 digits, or an
   ``arrival_ts`` that is not ``YYYY-MM-DDTHH:MM:SS.mmmZ`` is malformed: counted, left
   out. Blank lines are skipped.
3. Dedupe in one window step. The partition is the event id when the line has one,
   else the position (shard, sequence number, subsequence number); rows are ordered by
   arrival, shard, sequence number (as a number: by length, then text), subsequence and
   object key. With ``lag`` over that window, a row at the same position as the row
   before it is a transport duplicate (copies of one record are identical lines, so
   they sit next to each other); a row whose event id arrived at most ``horizon``
   before it (the row before it, kept or not) is a producer duplicate; the rest are
   kept.
4. Write the kept rows of the day as Parquet partitioned by ``dt=YYYY-MM-DD/hour=HH``
   of the object's key (not of the arrival), timestamps as microseconds UTC, zstd by
   default (the Spark job's default). Rows of the horizon before the day are read only
   to recognise retries, never written or counted.

The hours before the day are found by folder: the lander names an object after its
records' arrival minute, so every record that arrived within the horizon before the day
lies in those hours' folders.

Not done here: the Spark job's ``landed_ts`` column (the file's modification time).
DuckDB fails the whole query on a file whose gzip stream is truncated, corrupt or not
gzip, so this baseline runs on undamaged archives
(:class:`bench.prodlike.ProdArchive` with ``damaged=False``). Lines that are not JSON
text at all may be split differently from a newline-only reader (DuckDB's CSV reader
also breaks at a lone CR); landed lines have none.

The caller measures CPU; this module measures only wall time.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb

from consumer.archive.envelope import DATA_MARKER, HEADER
from consumer.archive.layout import day_glob, hour_glob, stream_folder

MAX_SEQUENCE_DIGITS = 128
DEFAULT_HORIZON = timedelta(days=1)
ARRIVAL_FORMAT = "%Y-%m-%dT%H:%M:%S.%gZ"
ARRIVAL_PATTERN = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"
REL_PATTERN = r"(dt=\d{4}-\d{2}-\d{2}/hour=\d{2}/minute=\d{2}/shard=[^/]+/[^/]+)$"
MARKER = DATA_MARKER

_PATHS = "[" + ", ".join(f"'$.{name}'" for name in HEADER) + "]"
_UNPACK = ", ".join(f"f[{i}] AS j_{name}" for i, name in enumerate(HEADER, start=1))

_JUDGE = rf"""
CREATE TEMP TABLE judged AS
WITH raw AS (
    SELECT line, instr(line, '{MARKER}') AS marker_at,
        regexp_extract(filename, '{REL_PATTERN}', 1) AS rel
    FROM read_csv(
        $files,
        columns = {{'line': 'VARCHAR'}},
        header = false,
        delim = $nul,
        quote = '',
        escape = '',
        new_line = '\n',
        auto_detect = false,
        compression = 'gzip',
        strict_mode = false,
        max_line_size = 16777216,
        filename = true
    )
    WHERE trim(line, $blanks) <> ''
),
sliced AS (
    SELECT rel, substring(rel, 4, 10) AS dt, substring(rel, 20, 2) AS hour,
        marker_at + {len(MARKER)} AS payload_at,
        marker_at > 0 AND suffix(line, '}}') AND length(line) > payload_at AS found,
        CASE WHEN found THEN substring(line, 1, marker_at - 1) || '}}' END AS head,
        CASE WHEN found THEN substring(line, payload_at, length(line) - payload_at) END AS data
    FROM raw
),
fields AS (
    SELECT dt, hour, rel, data, {_UNPACK}
    FROM (
        SELECT *, CASE WHEN json_valid(head) AND json_type(head) = 'OBJECT'
            THEN json_extract(head, {_PATHS}) END AS f
        FROM sliced
    )
),
typed AS (
    SELECT dt, hour, rel, data,
        j_stream ->> '$' AS stream,
        j_shard_id ->> '$' AS shard_id,
        j_sequence_number ->> '$' AS sequence_number,
        try_cast(j_subsequence_number ->> '$' AS BIGINT) AS subsequence_number,
        j_partition_key ->> '$' AS partition_key,
        try_strptime(j_arrival_ts ->> '$', '{ARRIVAL_FORMAT}') AS arrival,
        j_event_id ->> '$' AS event_id,
        coalesce(
            json_type(j_stream) = 'VARCHAR' AND stream = $stream
            AND json_type(j_shard_id) = 'VARCHAR'
            AND json_type(j_sequence_number) = 'VARCHAR'
            AND regexp_full_match(sequence_number, '[0-9]{{1,{MAX_SEQUENCE_DIGITS}}}')
            AND json_type(j_subsequence_number) = 'UBIGINT'
            AND subsequence_number IS NOT NULL
            AND json_type(j_partition_key) = 'VARCHAR'
            AND json_type(j_arrival_ts) = 'VARCHAR'
            AND regexp_full_match(j_arrival_ts ->> '$', '{ARRIVAL_PATTERN}')
            AND arrival IS NOT NULL
            AND (j_event_id IS NULL OR json_type(j_event_id) IN ('NULL', 'VARCHAR')),
            false
        ) AS ok
    FROM fields
),
ordered AS (
    SELECT *,
        lag(shard_id) OVER w AS before_shard,
        lag(sequence_number) OVER w AS before_sequence,
        lag(subsequence_number) OVER w AS before_subsequence,
        lag(arrival) OVER w AS before_arrival
    FROM typed
    WINDOW w AS (
        -- Lines that are not records share one (NULL) partition: never judged.
        PARTITION BY CASE WHEN ok THEN coalesce(
            'e' || event_id,
            'p' || shard_id || '/' || sequence_number || '/' || subsequence_number
        ) END
        -- (length, text) is integer order for digit strings, as in the Spark job.
        ORDER BY arrival, shard_id, length(sequence_number), sequence_number,
            subsequence_number, rel
    )
)
SELECT
    stream, shard_id, sequence_number, subsequence_number, partition_key,
    arrival::TIMESTAMPTZ AS arrival_ts, event_id, data, dt, hour,
    dt = $day AS in_window,
    CASE
        WHEN NOT ok THEN 'malformed'
        WHEN before_shard IS NULL THEN 'kept'
        WHEN before_shard = shard_id AND before_sequence = sequence_number
            AND before_subsequence = subsequence_number THEN 'transport'
        WHEN event_id IS NOT NULL
            AND before_arrival >= arrival - to_microseconds($horizon_us) THEN 'producer'
        ELSE 'kept'
    END AS fate
FROM ordered
"""

_OUTPUT = """
SELECT
    stream, shard_id, sequence_number, subsequence_number, partition_key, arrival_ts,
    event_id, data, dt, hour
FROM judged
WHERE in_window AND fate = 'kept'
"""

_COUNTS = """
SELECT
    dt || 'T' || hour,
    count(*) FILTER (fate = 'kept'),
    count(*) FILTER (fate = 'transport'),
    count(*) FILTER (fate = 'producer'),
    count(*) FILTER (fate = 'malformed'),
    coalesce(sum(strlen(data)) FILTER (fate = 'kept'), 0)
FROM judged
WHERE in_window
GROUP BY ALL
ORDER BY ALL
"""


@dataclass(frozen=True, slots=True)
class DuckResult:
    """What one DuckDB compaction read, dropped and wrote (the day's objects only)."""

    rows_in: int
    """Lines read, records or not."""
    rows_invalid: int
    """Lines that are not landed records (malformed, set aside)."""
    rows_out: int
    transport_duplicates: int
    producer_duplicates: int
    files: list[Path]
    """The Parquet files written."""
    wall_seconds: float
    hours: dict[str, tuple[int, int, int, int]]
    """``YYYY-MM-DDTHH`` of the object keys -> (kept, transport, producer, malformed)."""
    payload_bytes: int
    """UTF-8 bytes of the kept rows' ``data``."""


def _literal(text: str) -> str:
    """A SQL string literal (COPY TO takes no parameter)."""
    return "'" + text.replace("'", "''") + "'"


def input_files(archive: Path, stream: str, day: date, horizon: timedelta) -> list[str]:
    """The day's landed objects, then those of the hours of ``horizon`` before it."""
    files = sorted(str(path) for path in archive.glob(day_glob(stream, day)))
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    hour = (start - horizon).replace(minute=0, second=0, microsecond=0)
    folder = archive / stream_folder(stream)
    while hour < start:
        found = folder.glob(hour_glob(hour))
        files += sorted(str(path) for path in found)
        hour += timedelta(hours=1)
    return files


def compact_with_duckdb(
    archive: Path,
    stream: str,
    day: date,
    out: Path,
    *,
    threads: int = 2,
    compression: str = "zstd",
    horizon: timedelta = DEFAULT_HORIZON,
) -> DuckResult:
    """Compact one day of ``stream`` from the archive at ``archive`` into ``out``.

    ``out`` must not exist yet, or be empty. ``compression``: a DuckDB Parquet codec
    (snappy, zstd, gzip, uncompressed). ``horizon``: how far apart two copies of an
    event may arrive for the later one to be a producer duplicate.
    """
    started = time.perf_counter()
    files = input_files(archive, stream, day, horizon)
    if not any(f"/dt={day.isoformat()}/" in name for name in files):
        raise FileNotFoundError(f"no landed object of {stream} on {day} under {archive}")
    # A spill, if any, goes to a directory of ours rather than DuckDB's default (.tmp
    # under the current directory).
    with tempfile.TemporaryDirectory(prefix="compaction-duckdb-") as spill:
        connection = duckdb.connect(config={"threads": threads, "temp_directory": spill})
        try:
            connection.execute("SET TimeZone = 'UTC'")
            # Output order is not part of the job; not keeping it saves memory.
            connection.execute("SET preserve_insertion_order = false")
            connection.execute(
                _JUDGE,
                {
                    "files": files,
                    "nul": "\0",
                    "blanks": " \t\r\v\f",
                    "stream": stream,
                    "day": day.isoformat(),
                    "horizon_us": horizon // timedelta(microseconds=1),
                },
            )
            written = connection.execute(
                f"COPY ({_OUTPUT}) TO {_literal(str(out))} "
                f"(FORMAT parquet, PARTITION_BY (dt, hour), COMPRESSION {_literal(compression)}, "
                "RETURN_FILES true)"
            ).fetchall()
            counts = connection.execute(_COUNTS).fetchall()
        finally:
            connection.close()
    wall = time.perf_counter() - started
    hours = {
        str(hour): (int(kept), int(transport), int(producer), int(malformed))
        for hour, kept, transport, producer, malformed, _ in counts
    }
    totals = [sum(values) for values in zip(*hours.values(), strict=True)] or [0, 0, 0, 0]
    kept, transport, producer, malformed = totals
    ((written_rows, paths),) = written
    assert written_rows == kept, (written_rows, kept)
    return DuckResult(
        rows_in=sum(totals),
        rows_invalid=malformed,
        rows_out=kept,
        transport_duplicates=transport,
        producer_duplicates=producer,
        files=[Path(path) for path in paths],
        wall_seconds=wall,
        hours=hours,
        payload_bytes=sum(int(row[5]) for row in counts),
    )
