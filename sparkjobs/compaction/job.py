"""What one compaction is: which archive, stream and window, and where its output goes.

Pure (no pyspark), so planning (:mod:`sparkjobs.compaction.plan`) and its tests can take a job
without a JVM; :mod:`sparkjobs.compaction.compact` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from consumer.archive.layout import stream_folder
from consumer.errors import LanderError
from sparkjobs.catalog import TableRef, table_ref
from sparkjobs.io import join
from sparkjobs.window import Window

if TYPE_CHECKING:
    from sparkjobs.table.declared import Declared

MiB = 1 << 20


class CompactionError(LanderError, RuntimeError):
    """The window could not be compacted (strict mode found bad input, or reading or
    writing failed): ``lander compact`` prints the message, one line, and exits 1. Not
    retried in the run: the next scheduled run starts the window again. Still a
    RuntimeError, as it always was."""

    retriable = False


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
    arrived at most this long before it is a producer duplicate
    (:mod:`sparkjobs.compaction.dedupe`)."""
    strict: bool = False
    compression: str = "zstd"
    payload_format: str = "json"
    """How ``data`` was landed (``LANDER_PAYLOAD_FORMAT``): ``json`` text, or ``raw`` base64."""
    catalog: str = "lander"
    """The pyiceberg catalog (``LANDER_CATALOG``; :func:`sparkjobs.table.table.open_catalog`)."""
    table: str = "lander.{stream}"
    """The table's identifier, ``{stream}`` standing for the stream (``LANDER_TABLE``)."""
    sequence_pointer: str | None = None
    """``LANDER_SEQUENCE_POINTER``: a record without an event id is deduped by its
    partition key and this number of its payload (:mod:`sparkjobs.compaction.dedupe`)."""
    payload_schema: str = "infer"
    """``LANDER_PAYLOAD_SCHEMA``: ``infer`` the typed payload columns from the records (the
    default), ``off`` (none), or ``declared`` (:attr:`declared`, the rest inferred)."""
    declared: Declared | None = None
    """The declared payload schema (:mod:`sparkjobs.table.declared`)."""

    @property
    def typed(self) -> bool:
        """Whether the run writes typed payload columns (JSON payloads only)."""
        return self.payload_format == "json" and self.payload_schema != "off"

    @property
    def source(self) -> str:
        """The stream's folder in the archive."""
        return join(self.archive, stream_folder(self.stream))

    @property
    def target(self) -> str:
        """The stream's folder in the output."""
        return join(self.output, stream_folder(self.stream))


def ref_for(job: CompactJob) -> TableRef:
    """The table a compaction job publishes to."""
    return table_ref(job.output, job.stream, job.catalog, job.table)
