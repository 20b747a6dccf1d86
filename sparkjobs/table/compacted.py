"""Reading what compaction published, through the Iceberg table (never by listing folders).

Any engine that reads Iceberg reads the table without this module (docs/sparkjobs.md,
"Query it"); the jobs use it because Spark here has no Iceberg runtime: a pyiceberg
scan plans the files and Spark reads them.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from consumer.archive.layout import stream_folder
from sparkjobs.catalog import TableRef
from sparkjobs.io import Filesystem, join
from sparkjobs.table import table
from sparkjobs.table.columns import RESCUED
from sparkjobs.table.manifest import newest_by_hour
from sparkjobs.table.publish import HourEntry
from sparkjobs.table.schema import COMPACTED
from sparkjobs.window import Window, hour_label


def _hours(window: Window) -> list[str]:
    return [hour_label(h) for h in window.hour_starts()]


def window_entries(ref: TableRef, window: Window) -> dict[str, HourEntry]:
    """The published entries of the window's hours (hours never compacted are absent)."""
    found = table.open_table(ref, create=False)
    return {} if found is None else table.published(found, _hours(window))


def hour_runs(ref: TableRef, fs: Filesystem, window: Window) -> dict[str, str]:
    """The run that made each compacted hour of the window: from the table's snapshots,
    else (their snapshots expired) from the newest run manifest that published it."""
    runs = {hour: entry.run_id for hour, entry in window_entries(ref, window).items()}
    if len(runs) < window.hours:
        folder = join(ref.output, "_manifests", stream_folder(ref.stream))
        manifests = [
            json.loads(data)
            for item in fs.list_files(folder)
            if item.uri.endswith(".json") and (data := fs.read(item.uri)) is not None
        ]
        wanted = set(_hours(window)) - set(runs)
        runs.update((h, r) for h, r in newest_by_hour(manifests).items() if h in wanted)
    return runs


def event_pointer(ref: TableRef) -> str | None:
    """The pointer the table's ``event_ts`` was last written by (None: no such column)."""
    found = table.open_table(ref, create=False)
    return None if found is None else found.properties.get(table.EVENT_POINTER)


def current_files(ref: TableRef, window: Window) -> list[str]:
    """URIs of the data files that are the window now (as the table records them)."""
    found = table.open_table(ref, create=False)
    return [] if found is None else table.files_of(found, _hours(window))


def read(spark: SparkSession, ref: TableRef, window: Window) -> DataFrame:
    """The window's compacted rows."""
    files = [spark_uri(ref, f) for f in current_files(ref, window)]
    schema = StructType(
        [
            *COMPACTED.fields,
            StructField(RESCUED, StringType()),
            StructField(table.EVENT_TS, TimestampType()),
        ]
    )
    if not files:
        return spark.createDataFrame([], schema)
    # By name: a file written before the typed columns reads ``rescued`` (before the
    # event time, ``event_ts``) as null.
    return spark.read.schema(schema).parquet(*files)


def spark_uri(ref: TableRef, uri: str) -> str:
    """A data file's URI as this job's Spark reaches it: the table records ``s3://``,
    a job whose output is ``s3a://`` reads through S3A."""
    if ref.output.startswith("s3a://") and uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri
