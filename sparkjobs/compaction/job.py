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
from sparkjobs.table.declared import declared_setting
from sparkjobs.table.table import PARTITIONS, by_event_day
from sparkjobs.window import Window

if TYPE_CHECKING:
    from sparkjobs.settings import CompactSettings
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
    event_time_pointer: str | None = None
    """``LANDER_EVENT_TIME_POINTER``: the payload's event time, written as ``event_ts``
    (:mod:`sparkjobs.compaction.eventtime`)."""
    partition: str = "arrival_hour"
    """``LANDER_COMPACT_PARTITION``: the table's partitions
    (:data:`sparkjobs.compaction.eventtime.PARTITIONS`)."""

    def __post_init__(self) -> None:
        if self.partition not in PARTITIONS:
            raise CompactionError(
                f"partition {self.partition!r} is not one of {', '.join(PARTITIONS)}"
            )
        if by_event_day(self.partition) and self.event_time_pointer is None:
            raise CompactionError(
                f"partition {self.partition} needs the event time: set event_time_pointer"
            )

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


def jobs_of(settings: CompactSettings) -> list[CompactJob]:
    """Every stream's every window of ``settings``, as jobs, in the order they run: each
    stream with what LANDER_STREAMS_FILE sets for it."""
    own = {stream: settings.for_stream(stream) for stream in settings.streams}
    return [
        CompactJob(
            archive=own[stream].archive_uri,
            stream=stream,
            window=window,
            output=settings.compacted,
            target_file_bytes=settings.compact_target_file_mb << 20,
            horizon_minutes=settings.horizon_minutes,
            strict=settings.compact_strict,
            compression=settings.compact_compression,
            payload_format=own[stream].payload_format,
            catalog=settings.catalog,
            table=settings.table,
            sequence_pointer=own[stream].sequence_pointer,
            payload_schema=own[stream].payload_mode,
            declared=declared_setting(own[stream].declared_document, own[stream].payload_schema),
            event_time_pointer=own[stream].event_time_pointer,
            partition=settings.compact_partition,
        )
        for stream, window in settings.runs()
    ]
