"""What one compaction is: which archive, stream and window, and where its output goes.

Pure (no pyspark), so planning (:mod:`sparkjobs.plan`) and its tests can take a job
without a JVM; :mod:`sparkjobs.compact` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumer.archive.layout import hour_folder, stream_folder
from sparkjobs.io import join
from sparkjobs.window import Window

MiB = 1 << 20


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

    @property
    def source(self) -> str:
        """The stream's folder in the archive."""
        return join(self.archive, stream_folder(self.stream))

    @property
    def target(self) -> str:
        """The stream's folder in the output."""
        return join(self.output, stream_folder(self.stream))


def pointer_uri(job: CompactJob) -> str:
    """Where this job's window is published."""
    published = join(job.target, "_published")
    if job.window.hours == 1:
        return join(published, f"{hour_folder(job.window.start)}.json")
    return join(published, f"dt={job.window.day:%Y-%m-%d}.json")
