"""The settings the workers and the batch jobs share, declared once.

(A validator here must not share its name with one of a subclass: pydantic keeps one
validator per name, so the subclass's would silently replace it.)

One environment serves the fleet and the nightly jobs, so a variable that means the
same thing to both is one field here, inherited by the daemon's
(:class:`consumer.config.worker.Settings`) and the jobs' settings (sparkjobs/settings.py):

- :class:`Logging`: how every command logs;
- :class:`Archive`: where the landed archive is and what its payloads are: the workers
  write it, ``lander compact``, ``analyse`` and ``raw-table`` read it.

A command that needs more of a shared field says so where it is defined (the worker
writes only ``s3://`` and ``file:///`` archives; ``compact`` and ``raw-table`` need
one at all).
"""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from consumer.config.fields import CONFIG, LogFormat, LogLevel, PayloadFormat, check_pointer


class Logging(BaseSettings):
    """How a command logs."""

    model_config = CONFIG

    log_format: LogFormat = Field(
        default="auto",
        description="json: one JSON object a line; console: readable columns; auto: json "
        "unless stderr is a terminal.",
    )
    log_level: LogLevel = Field(default="info", description="Lowest level logged.")


class Archive(BaseSettings):
    """The landed archive: where it is and what its payloads are."""

    model_config = CONFIG

    archive_required: ClassVar[bool] = False
    """Set by a command that cannot run without an archive."""

    archive: str | None = Field(
        default=None,
        description="URI of the landed archive: where the workers write it (s3://bucket/"
        "prefix or file:///path) and the batch commands read it (there also s3a:// or "
        "s3n://). lander compact and raw-table need it; lander analyse reads it to count "
        "dead letters.",
    )
    payload_format: PayloadFormat = Field(
        default="json",
        description="json: payloads are parsed (bad ones dead-lettered) and kept byte for "
        "byte in data; raw: stored base64 (data is the base64 text).",
    )
    sequence_pointer: str | None = Field(
        default=None,
        description="JSON pointer to the number producers stamp on each partition key's "
        "records, e.g. /seq: read by LANDER_DEDUP_KEYS in the workers; the compaction "
        "drops a record without an event id whose (partition key, number) arrived within "
        "the dedupe horizon before it (sequence duplicates, counted apart), and the "
        "analysis reports gaps and reorders per partition key.",
    )

    @field_validator("archive")
    @classmethod
    def _archive_uri(cls, value: str | None) -> str | None:
        if value is not None and "://" not in value:
            raise ValueError(
                "must be s3://bucket[/prefix] or file:///absolute/path (the batch commands "
                "also read s3a:// and s3n://)"
            )
        return None if value is None else value.rstrip("/")

    @field_validator("sequence_pointer")
    @classmethod
    def _sequence_pointer(cls, value: str | None) -> str | None:
        return check_pointer(value)

    @model_validator(mode="after")
    def _archive_given(self) -> Self:
        if self.archive_required and self.archive is None:
            raise ValueError("LANDER_ARCHIVE is required but not set")
        return self

    @model_validator(mode="after")
    def _sequence_needs_json(self) -> Self:
        if self.sequence_pointer is not None and self.payload_format == "raw":
            raise ValueError(
                "LANDER_SEQUENCE_POINTER points into JSON payloads; with "
                "LANDER_PAYLOAD_FORMAT=raw they are base64"
            )
        return self

    @property
    def archive_uri(self) -> str:
        """The archive, where :attr:`archive_required` made sure there is one."""
        if self.archive is None:
            raise ValueError("LANDER_ARCHIVE is required but not set")
        return self.archive
