"""Settings of the Spark jobs: ``LANDER_*`` variables, overridden by flags.

One environment serves the workers and the nightly job: what both read is declared
once, in :mod:`consumer.config.shared` (logging; the archive, its payload format and
sequence pointer), and mixed in here. ``LANDER_STREAM`` is a list of streams here (one
name for a worker), and ``LANDER_STREAMS_FILE``'s tables give a stream its own archive,
payload format and sequence pointer here too (:meth:`StreamSettings.for_stream`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import Field, ValidationError, field_validator, model_validator

from consumer.config import (
    Archive,
    CaseInsensitive,
    Logging,
    load_class,
    problems,
)
from consumer.config.fields import CONFIG
from consumer.config.streams_file import overrides_for, read_streams_file
from sparkjobs.catalog import check_template
from sparkjobs.window import Window, WindowError, duration_minutes, horizon_minutes, parse_windows

Compression = Annotated[Literal["snappy", "zstd", "gzip", "none"], CaseInsensitive]


_STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _uri(value: str) -> str:
    if "://" not in value:
        raise ValueError(f"must be a URI (file:///path, s3a://bucket/prefix), got {value!r}")
    return value.rstrip("/")


PER_STREAM = (
    "archive",
    "payload_format",
    "sequence_pointer",
    "payload_schema",
    "event_time_pointer",
)
"""What a stream's table in LANDER_STREAMS_FILE changes for the batch commands (the
workers' initial_position and event_id_pointer do not concern them)."""

_S3_SCHEMES = ("s3", "s3a", "s3n")


def with_scheme_of(uri: str, like: str) -> str:
    """An S3 ``uri`` with the scheme of ``like`` when both are S3: the workers write to
    ``s3://``, Spark outside EMR reads through ``s3a://``."""
    scheme, _, rest = uri.partition("://")
    wanted = like.partition("://")[0]
    if scheme in _S3_SCHEMES and wanted in _S3_SCHEMES:
        return f"{wanted}://{rest}"
    return uri


def yesterday() -> str:
    """The default window of a nightly run: the whole previous UTC day."""
    return (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")


class StreamSettings(Logging):
    """Which streams, and how to log: what every batch command shares."""

    model_config = CONFIG

    stream: str = Field(
        description="Name of the stream whose archive is read; several separated by "
        "commas are compacted (or analysed) one after another in one Spark session."
    )
    streams_file: str | None = Field(
        default=None,
        description="The workers' LANDER_STREAMS_FILE: a stream's table there gives its "
        "archive (read with LANDER_ARCHIVE's scheme, so s3:// becomes s3a:// beside an "
        "s3a:// LANDER_ARCHIVE), payload_format and sequence_pointer; the rest comes from "
        "the environment.",
    )

    @field_validator("stream")
    @classmethod
    def _streams(cls, value: str) -> str:
        names = [name.strip() for name in value.split(",")]
        for name in names:
            if not _STREAM_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a stream name (1-128 characters of A-Z a-z 0-9 _ . -; "
                    "several separated by commas)"
                )
        if len(set(names)) < len(names):
            raise ValueError(f"a stream is named twice in {value!r}")
        return ",".join(names)

    @property
    def streams(self) -> list[str]:
        """The streams to run, in the order given."""
        return self.stream.split(",")

    @model_validator(mode="after")
    def _streams_file(self) -> Self:
        if self.streams_file is None:
            return self
        try:
            tables = read_streams_file(self.streams_file)
        except ValueError as exc:
            raise ValueError(f"LANDER_STREAMS_FILE {exc}") from None
        for stream in self.streams:
            try:
                self._one(stream, overrides_for(tables, stream))
            except ValidationError as exc:
                raise ValueError(
                    f"LANDER_STREAMS_FILE, stream {stream}: {'; '.join(problems(exc))}"
                ) from None
        return self

    def for_stream(self, stream: str) -> Self:
        """The settings of one of the streams: these, with what LANDER_STREAMS_FILE sets
        for it."""
        if self.streams_file is None:
            return self.model_copy(update={"stream": stream})
        return self._one(stream, overrides_for(read_streams_file(self.streams_file), stream))

    def _one(self, stream: str, table: Mapping[str, str]) -> Self:
        values = self.model_dump()
        for key in PER_STREAM:
            if key not in table or key not in type(self).model_fields:
                continue
            value = table[key]
            if key == "archive":
                if values["archive"] is None:  # the analysis reads no archive then
                    continue
                value = with_scheme_of(value, values["archive"])
            values[key] = value
        return type(self)(**{**values, "stream": stream, "streams_file": None})


class TableSettings(StreamSettings):
    """Which streams' tables: what the Spark jobs and ``lander maintain`` share."""

    compacted: str = Field(
        description="URI of the compacted Parquet: file:///…, s3a://bucket/prefix or EMR's s3://."
    )
    catalog: str = Field(
        default="lander",
        min_length=1,
        description="The pyiceberg catalog of the compacted table, configured as pyiceberg "
        "does (PYICEBERG_CATALOG__<NAME>__TYPE=glue|rest|sql…, or ~/.pyiceberg.yaml); "
        "when not configured and the output is local: an embedded SQLite catalog in "
        "{compacted}/catalog.db.",
    )
    table: str = Field(
        default="lander.{stream}",
        description="The compacted table, namespace.table; {stream} stands for the stream "
        "(lower case, anything but a-z 0-9 _ as _).",
    )

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        return check_template(value)

    @field_validator("compacted")
    @classmethod
    def _compacted(cls, value: str) -> str:
        return _uri(value)


class JobSettings(TableSettings, Archive):
    """What both Spark jobs need."""

    window: str = Field(
        default_factory=yesterday,
        description="A day YYYY-MM-DD or an hour YYYY-MM-DDTHH (UTC), or several separated "
        "by commas, A..B for each day (or hour) from A to B; default: yesterday.",
    )
    spark_master: str | None = Field(
        default=None,
        description="Spark master for a local run (default local[*]); ignored under spark-submit.",
    )

    event_time_pointer: str | None = Field(
        default=None,
        description="JSON pointer to an event time in the payload, e.g. /ts (ISO-8601 "
        "text, or epoch seconds, or milliseconds above 1e11, unless the declared schema "
        "says how): the compaction writes it as the column event_ts, the analysis reports "
        "arrival minus it. Per stream in LANDER_STREAMS_FILE.",
    )

    @field_validator("event_time_pointer")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"must be a JSON pointer starting with '/', got {value!r}")
        return value

    @model_validator(mode="after")
    def _event_time_needs_json(self) -> Self:
        if self.event_time_pointer is not None and self.payload_format == "raw":
            raise ValueError(
                "LANDER_EVENT_TIME_POINTER points into JSON payloads; with "
                "LANDER_PAYLOAD_FORMAT=raw they are base64"
            )
        return self

    @field_validator("window")
    @classmethod
    def _window(cls, value: str) -> str:
        try:
            parse_windows(value)
        except WindowError as exc:
            # "window '…': why": the variable's name already leads the line.
            raise ValueError(str(exc).removeprefix("window ")) from None
        return value

    @property
    def windows(self) -> list[Window]:
        """The windows to run, in time order."""
        return parse_windows(self.window)

    def runs(self) -> list[tuple[str, Window]]:
        """Every stream's every window, in the order they run: by stream, then time."""
        return [(stream, window) for stream in self.streams for window in self.windows]


class CompactSettings(JobSettings):
    """``lander compact``."""

    archive_required: ClassVar[bool] = True

    compact_target_file_mb: int = Field(
        default=256, ge=1, description="Target size of a Parquet file; small hours get one file."
    )
    compact_dedupe_horizon: str = Field(
        default="1d",
        description="A record whose event id arrived at most this long before it is a "
        "producer duplicate: whole minutes, hours or days (90m, 24h, 1d; 0: only equal "
        "arrivals), at most 7d. The run also reads this much archive before the window.",
    )
    compact_strict: bool = Field(
        default=False, description="Fail the window on any bad input instead of reporting it."
    )
    compact_compression: Compression = Field(
        default="zstd",
        description="Parquet compression codec: zstd writes files about 42 % smaller than "
        "snappy for up to 8 % more CPU (docs/benchmarks.md, compaction).",
    )
    compact_allow_empty: bool = Field(
        default=False,
        description="A window without landed input is a success (exit 0) instead of exit 3; "
        "either way nothing is read or published.",
    )
    compact_allow_bad_input: bool = Field(
        default=False,
        description="A window with bad input (truncated or corrupt objects, malformed "
        "lines) is a success (exit 0) instead of exit 4; either way the readable rest is "
        "published and each bad file reported and counted.",
    )
    pushgateway: str | None = Field(
        default=None,
        description="URL of a Prometheus Pushgateway (http://host:9091): at the end of each "
        "run the job pushes per stream (job lander_compact) its windows' bad input and "
        "rows, and the run's exit code and finish time, which the shipped alerts watch. "
        "Unset: nothing is pushed. A failed push is one warning line; the exit code stays.",
    )

    compact_partition: Literal["arrival_hour", "arrival_hour,event_day", "event_day"] = Field(
        default="arrival_hour",
        description="The table's partitions: arrival_hour (hour(arrival_ts)), "
        "arrival_hour,event_day (then day(event_ts): late events join their event day's "
        "partition) or event_day (day(event_ts) only); event_day needs "
        "LANDER_EVENT_TIME_POINTER. An existing table's spec evolves; old files keep theirs.",
    )

    @model_validator(mode="after")
    def _event_day_needs_pointer(self) -> Self:
        if "event_day" in self.compact_partition and self.event_time_pointer is None:
            raise ValueError(
                f"LANDER_COMPACT_PARTITION={self.compact_partition} partitions by the event "
                "time: set LANDER_EVENT_TIME_POINTER (e.g. /ts)"
            )
        return self

    payload_schema: str = Field(
        default="infer",
        description="The payload's typed columns beside data (JSON payloads): infer (the "
        "default: from the records, new fields become columns, integers widen, a value "
        "that fits no column goes to rescued), off (only data), or the path of a "
        "JSON Schema file of the records whose fields it declares (timestamps, exact "
        "decimals, 32-bit integers; the others inferred). Per stream in "
        "LANDER_STREAMS_FILE.",
    )

    @field_validator("payload_schema")
    @classmethod
    def _payload_schema(cls, value: str) -> str:
        value = value.strip()
        if value.lower() in ("infer", "off"):
            return value.lower()
        _declared(value)
        return value

    @model_validator(mode="after")
    def _declared_needs_json(self) -> Self:
        if self.payload_mode == "declared" and self.payload_format == "raw":
            raise ValueError(
                "LANDER_PAYLOAD_SCHEMA declares JSON fields; with LANDER_PAYLOAD_FORMAT=raw "
                "payloads are base64"
            )
        return self

    @property
    def payload_mode(self) -> str:
        """``infer``, ``off`` or ``declared``."""
        return self.payload_schema if self.payload_schema in ("infer", "off") else "declared"

    @property
    def declared_document(self) -> dict[str, Any] | None:
        """The declared JSON Schema as read (None unless one is given); the compaction
        reads its types (:func:`sparkjobs.table.declared.read_declared`)."""
        return None if self.payload_mode != "declared" else _declared(self.payload_schema)

    @field_validator("pushgateway")
    @classmethod
    def _pushgateway(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value.strip()):
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value.strip().rstrip("/")

    @field_validator("compact_dedupe_horizon")
    @classmethod
    def _horizon(cls, value: str) -> str:
        horizon_minutes(value)
        return value.strip().lower()

    @property
    def horizon_minutes(self) -> int:
        """The dedupe horizon in minutes."""
        return horizon_minutes(self.compact_dedupe_horizon)


def _declared(path: str) -> dict[str, Any]:
    """The JSON Schema file at ``path``, read; ValueError, one line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(
            f"must be infer, off or a JSON Schema file; cannot read {path}: {exc.strerror or exc}"
        ) from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"{path} is not a JSON Schema (an object)")  # noqa: TRY004
    return schema


class AnalyseSettings(JobSettings):
    """``lander analyse``."""

    reports: str | None = Field(
        default=None,
        description="Where tables and the HTML report go (default {compacted}/reports).",
    )
    top_keys: int = Field(default=20, ge=1, le=1000, description="Hot partition keys listed.")
    analyse_allow_empty: bool = Field(
        default=False,
        description="A window without compacted data is a success (exit 0) instead of exit 3; "
        "either way no report is written.",
    )


class RawTableSettings(StreamSettings, Archive):
    """``lander raw-table``."""

    archive_required: ClassVar[bool] = True

    raw_database: str = Field(
        default="lander",
        pattern=r"^[a-z0-9_]{1,255}$",
        description="Glue database of the raw landing tables (Athena's schema).",
    )
    raw_table: str = Field(
        default="{stream}_raw",
        description="The raw landing table's name; {stream} stands for the stream (lower "
        "case, anything but a-z 0-9 _ as _).",
    )
    raw_days: int = Field(
        default=400,
        ge=1,
        le=3660,
        description="Days back from today that the table's dt partitions are projected over "
        "(the archive's lifecycle keeps landed JSON 400 days).",
    )

    @field_validator("raw_table")
    @classmethod
    def _raw_table(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9_]{1,200}", value.replace("{stream}", "s")):
            raise ValueError(
                f"{value!r} is not a Glue table name (a-z 0-9 _; {{stream}} for the stream)"
            )
        return value


class MaintainSettings(TableSettings):
    """``lander maintain``."""

    snapshot_retention: str = Field(
        default="7d",
        description="Snapshots older than this are expired (the current one never is): "
        "how far back readers can time-travel (90m, 24h, 7d).",
    )
    orphan_age: str = Field(
        default="3d",
        description="Files no snapshot references are deleted once this old: longer than "
        "any compaction run, whose files exist before its commit names them (90m, 24h, 3d).",
    )

    @field_validator("snapshot_retention", "orphan_age")
    @classmethod
    def _duration(cls, value: str) -> str:
        if duration_minutes(value) < 60:
            raise ValueError(f"must be at least 1h, got {value!r}")
        return value.strip().lower()


T = TypeVar("T", bound=StreamSettings)


def load(kind: type[T], **overrides: Any) -> T:
    """Settings from the environment and flags; :class:`ConfigError` in one line.

    As for the workers, a ``LANDER_*`` variable no command reads is an error.
    """
    return load_class(kind, **overrides)
