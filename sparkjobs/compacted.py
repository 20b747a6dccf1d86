"""Reading what compaction published, through the Iceberg table (never by listing folders).

Any engine that reads Iceberg reads the table without this module (docs/sparkjobs.md,
"Query it"); the jobs use it because Spark here has no Iceberg runtime: a pyiceberg
scan plans the files and Spark reads them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from sparkjobs import table
from sparkjobs.catalog import TableRef
from sparkjobs.publish import HourEntry
from sparkjobs.schema import COMPACTED
from sparkjobs.window import Window, hour_label


def _hours(window: Window) -> list[str]:
    return [hour_label(h) for h in window.hour_starts()]


def window_entries(ref: TableRef, window: Window) -> dict[str, HourEntry]:
    """The published entries of the window's hours (hours never compacted are absent)."""
    found = table.open_table(ref, create=False)
    return {} if found is None else table.published(found, _hours(window))


def current_files(ref: TableRef, window: Window) -> list[str]:
    """URIs of the data files that are the window now (as the table records them)."""
    found = table.open_table(ref, create=False)
    return [] if found is None else table.files_of(found, _hours(window))


def read(spark: SparkSession, ref: TableRef, window: Window) -> DataFrame:
    """The window's compacted rows."""
    files = [spark_uri(ref, f) for f in current_files(ref, window)]
    if not files:
        return spark.createDataFrame([], COMPACTED)
    return spark.read.schema(COMPACTED).parquet(*files)


def spark_uri(ref: TableRef, uri: str) -> str:
    """A data file's URI as this job's Spark reaches it: the table records ``s3://``,
    a job whose output is ``s3a://`` reads through S3A."""
    if ref.output.startswith("s3a://") and uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri
