"""Reading what compaction published: follow the pointers, never list the data folders.

A compacted stream's folder holds every run's files, current or replaced; only the
pointers say which are current. Spark, DuckDB or pyarrow readers take the file list
from :func:`current_files`; Spark users can call :func:`read`.
"""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame, SparkSession

from consumer.archive import layout
from sparkjobs import publish
from sparkjobs.io import Filesystem, join
from sparkjobs.publish import HourEntry, Pointer
from sparkjobs.schema import COMPACTED
from sparkjobs.window import Window, hour_label


def stream_folder(output: str, stream: str) -> str:
    """The stream's folder in the compacted output."""
    return join(output, layout.stream_folder(stream))


def pointer_uris(fs: Filesystem, output: str, stream: str, day: date) -> list[str]:
    """The day's pointer and its hour pointers (those that exist are read)."""
    published = join(stream_folder(output, stream), "_published")
    folder = f"dt={day:%Y-%m-%d}"
    hourly = [i.uri for i in fs.list_files(join(published, folder)) if i.uri.endswith(".json")]
    return [join(published, f"{folder}.json"), *sorted(hourly)]


def entries(fs: Filesystem, output: str, stream: str, day: date) -> dict[str, HourEntry]:
    """For each published hour of ``day``, the entry readers use now."""
    pointers = []
    for uri in pointer_uris(fs, output, stream, day):
        data = fs.read(uri)
        if data is not None:
            pointers.append(Pointer.from_json(data))
    return publish.resolve(pointers)


def window_entries(
    fs: Filesystem, output: str, stream: str, window: Window
) -> dict[str, HourEntry]:
    """The current entries of the window's hours (hours never compacted are absent)."""
    hours = {hour_label(h) for h in window.hour_starts()}
    found = entries(fs, output, stream, window.day)
    return {hour: entry for hour, entry in found.items() if hour in hours}


def current_files(fs: Filesystem, output: str, stream: str, window: Window) -> list[str]:
    """URIs of the Parquet files that are the window now."""
    base = stream_folder(output, stream)
    found = window_entries(fs, output, stream, window)
    return [join(base, f.path) for entry in found.values() for f in entry.files]


def read(
    spark: SparkSession, fs: Filesystem, output: str, stream: str, window: Window
) -> DataFrame:
    """The window's compacted rows (``dt``/``hour`` come from ``arrival_ts``)."""
    files = current_files(fs, output, stream, window)
    if not files:
        return spark.createDataFrame([], COMPACTED)
    return spark.read.schema(COMPACTED).parquet(*files)
