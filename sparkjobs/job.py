"""What one compaction is: which archive, stream and window, and where its output goes.

Pure (no pyspark), so planning (:mod:`sparkjobs.plan`) and its tests can take a job
without a JVM; :mod:`sparkjobs.compact` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.archive.layout import stream_folder
from sparkjobs.io import join
from sparkjobs.window import Window

MiB = 1 << 20

COMPACTED_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("stream", "string", False),
    ("shard_id", "string", False),
    ("sequence_number", "string", False),
    ("subsequence_number", "long", False),
    ("partition_key", "string", True),
    ("arrival_ts", "timestamp", False),
    ("landed_ts", "timestamp", True),
    ("event_id", "string", True),
    ("data", "string", True),
)
"""A compacted row's columns in order: name, kind, and whether Spark may leave it null.
Spark's schema (:data:`sparkjobs.schema.COMPACTED`) and the Iceberg table's
(:func:`sparkjobs.table.iceberg_schema`, field ids 1.. in this order) both come from here."""


class CompactionError(RuntimeError):
    """The window could not be compacted (strict mode found bad input, or I/O failed)."""


@dataclass(frozen=True, slots=True)
class CompactJob:
    """One compaction: which archive, stream and window, and where the Parquet goes."""

    archive: str
    stream: str
    window: Window
    output: str
    target_file_bytes: int = 256 * MiB
    horizon_minutes: int = 24 * 60
    """The dedupe horizon (``LANDER_COMPACT_DEDUPE_HORIZON``): a record whose event id
    arrived at most this long before it is a producer duplicate (:mod:`sparkjobs.dedupe`)."""
    strict: bool = False
    compression: str = "zstd"
    payload_format: str = "json"
    """How ``data`` was landed (``LANDER_PAYLOAD_FORMAT``): ``json`` text, or ``raw`` base64."""
    catalog: str = "lander"
    """The pyiceberg catalog (``LANDER_CATALOG``; :func:`sparkjobs.table.open_catalog`)."""
    table: str = "lander.{stream}"
    """The table's identifier, ``{stream}`` standing for the stream (``LANDER_TABLE``)."""
    sequence_pointer: str | None = None
    """``LANDER_SEQUENCE_POINTER``: a record without an event id is deduped by its
    partition key and this number of its payload (:mod:`sparkjobs.dedupe`)."""

    @property
    def source(self) -> str:
        """The stream's folder in the archive."""
        return join(self.archive, stream_folder(self.stream))

    @property
    def target(self) -> str:
        """The stream's folder in the output."""
        return join(self.output, stream_folder(self.stream))
