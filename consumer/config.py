"""Settings: one object, from ``LANDER_*`` environment variables and CLI flags.

AWS endpoints, region and credentials are deliberately *not* settings here: botocore
reads ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_KINESIS`` (``_DYNAMODB``,
``_S3``) and the credential chain itself, so pointing the daemon at an emulator needs
no project-specific switch.

Long module: every settings class, the loader that folds their errors into one line
(unknown variables included) and the flags derived from their fields change together.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import importlib
import importlib.util
import os
import re
import secrets
import socket
import types
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, SettingsConfigDict

from consumer.errors import LanderError
from consumer.landing.protection import ObjectProtection, check_owner, parse_tags
from consumer.sequence import Sentinel
from consumer.stream.streams import StreamChoice
from consumer.streams_file import overrides_for, read_streams_file

_STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")

PREFIX = "LANDER_"


def _lower(value: Any) -> Any:
    """Choices are case-insensitive: ``INFO`` and ``JSON`` mean ``info`` and ``json``."""
    return value.strip().lower() if isinstance(value, str) else value


CaseInsensitive = BeforeValidator(_lower)
"""Put on a ``Literal`` of lower-case choices: the value is lower-cased before the check."""

LogFormat = Annotated[Literal["auto", "json", "console"], CaseInsensitive]
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], CaseInsensitive]
PayloadFormat = Annotated[Literal["json", "raw"], CaseInsensitive]
GzipCodec = Annotated[Literal["auto", "zlib", "isal"], CaseInsensitive]
ReadMode = Annotated[Literal["polling", "efo"], CaseInsensitive]
ArchiveSse = Annotated[Literal["none", "sse-s3", "sse-kms"], CaseInsensitive]


def default_worker_id() -> str:
    """Hostname, pid and a random suffix: unique per process start, readable in
    ``lander status``. Hostname and pid alone repeat across containers with host
    networking (pid 1 in each), as KCL's UUIDs do not."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Settings(BaseSettings):
    """Everything a worker needs to know; see docs/configuration.md."""

    model_config = SettingsConfigDict(env_prefix="LANDER_", extra="ignore", frozen=True)

    stream: str = Field(
        description="Name of the Kinesis data stream to consume (or LANDER_STREAMS)."
    )
    streams: str | None = Field(
        default=None,
        description="Several streams in one fleet and one lease table, instead of "
        "LANDER_STREAM: comma-separated names, ARNs and shell-style patterns (orders-*, "
        "matched against ListStreams). Listed again every LANDER_STREAMS_SYNC_SECONDS: "
        "new matching streams are read, a stream deleted or no longer matching is "
        "retired after three listings without it (its leases keep their checkpoints). "
        "Leases are keyed as KCL's multi-stream mode keys them "
        "(account:stream:creationEpoch:shardId), so such a KCL table is adopted.",
    )
    streams_file: str | None = Field(
        default=None,
        description="With LANDER_STREAMS: a TOML file of the settings that differ between "
        'streams, one table per stream name or pattern ([streams."orders"] archive = '
        '"s3://b/orders"); a stream may set archive, payload_format, event_id_pointer, '
        "sequence_pointer and initial_position. Exact names win over patterns, then the "
        "first pattern in the file. Validated at start.",
    )
    streams_sync_seconds: float = Field(
        default=60.0,
        gt=0,
        description="With LANDER_STREAMS: how often every worker lists the streams "
        "(ListStreams allows 5 calls a second per account: a fleet of W workers makes "
        "W / this many).",
    )
    lease_table: str = Field(description="DynamoDB table holding one lease per shard.")
    archive: str | None = Field(
        default=None,
        description="Where the lander writes: s3://bucket/prefix or file:///path.",
    )
    archive_sse: ArchiveSse = Field(
        default="none",
        description="Server-side encryption asked for on every landed object (s3:// "
        "archives): sse-s3 (AES256), sse-kms (with LANDER_ARCHIVE_KMS_KEY, or the "
        "account's aws/s3 key), or none: the bucket's default encryption applies.",
    )
    archive_kms_key: str | None = Field(
        default=None,
        description="With sse-kms: the KMS key (id, ARN, alias/name or alias ARN), "
        "checked at start (it must exist, be enabled and be a symmetric encryption key).",
    )
    archive_bucket_key: bool = Field(
        default=False,
        description="With sse-kms: use an S3 Bucket Key, so S3 asks KMS for data keys per "
        "bucket rather than per object (far fewer KMS requests; the encryption context "
        "becomes the bucket's ARN).",
    )
    archive_tags: str | None = Field(
        default=None,
        description="Tags on every landed object, key=value pairs separated by commas "
        "(at most 10; S3's tag characters).",
    )
    archive_expected_owner: str | None = Field(
        default=None,
        description="The account id that must own the archive's bucket: sent with every "
        "S3 request, so a bucket owned by anyone else refuses it (403).",
    )
    worker_id: str = Field(
        default_factory=default_worker_id,
        description="This worker's name in the lease table, one live process per id "
        "(default: hostname-pid-random).",
    )
    initial_position: str = Field(
        default="TRIM_HORIZON",
        description="Where a shard with no checkpoint starts: TRIM_HORIZON, LATEST or an "
        "ISO-8601 time.",
    )
    failover_seconds: float = Field(
        default=10.0,
        gt=0,
        description="A lease whose counter stands still this long is expired.",
    )
    renew_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Heartbeat interval (default: failover_seconds / 3).",
    )
    shard_sync_seconds: float = Field(
        default=30.0, gt=0, description="How often the stream's shards are listed."
    )
    read_mode: ReadMode = Field(
        default="polling",
        description="How shards are read. polling: GetRecords, about five calls a second "
        "per shard, shared with every other reader of the stream (2 MB/s per shard in "
        "all). efo: enhanced fan-out (SubscribeToShard): a registered stream consumer "
        "gets its own 2 MB/s per shard and records pushed about 70 ms after the put, "
        "billed per consumer-shard hour and per GB (docs/consumer.md).",
    )
    efo_consumer: str | None = Field(
        default=None,
        description="Name of the stream consumer in efo mode (default: the lease table's "
        "name, as KCL names it after the application). Registered at start if missing, "
        "then waited for until ACTIVE; a worker never deregisters it "
        "(`lander efo deregister` does). With LANDER_STREAMS each stream has a consumer "
        "of this name, registered when the worker first reads the stream.",
    )
    lease_sweep_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Board coordination: how often the leader reads every lease "
        "(eventually consistent) to find free ones and balance.",
    )
    poll_idle_seconds: float = Field(
        default=1.0,
        ge=0.2,
        description="Wait between GetRecords calls on a shard that is caught up.",
    )
    max_records_per_call: int = Field(
        default=10_000, ge=1, le=10_000, description="GetRecords Limit."
    )
    lease_table_create: bool = Field(
        default=True,
        description="Create the lease table at start when it is missing (false: a missing "
        "table stops start-up, for deployments whose role may not create tables).",
    )
    landing_failures: int = Field(
        default=3,
        ge=1,
        description="Consecutive failures of one shard's processor after which the worker "
        "probes its archive; if the probe fails too, the worker stops being ready, gives "
        "all its shards back and takes none until a probe succeeds.",
    )
    stall_seconds: float = Field(
        default=300.0,
        gt=0,
        description="lander status shows a shard as stalled when records wait and its "
        "checkpoint has not moved for this long.",
    )
    shutdown_seconds: float = Field(
        default=20.0,
        gt=0,
        description="Bound on a graceful shutdown: flush, checkpoint, release. Size the "
        "orchestrator's grace period (terminationGracePeriodSeconds, stopTimeout) above it.",
    )
    processor: str = Field(
        default="consumer.landing.lander:Lander",
        description="Record processor as module:Class (default: the built-in lander).",
    )
    max_records_per_file: int = Field(
        default=10_000, ge=1, description="A landed file holds at most this many records."
    )
    max_bytes_per_file: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="A landed file holds at most this many uncompressed bytes.",
    )
    flush_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Latency bound: a run spanning this many seconds of arrival time, or "
        "open this long on a quiet shard, lands.",
    )
    gzip_level: int = Field(
        default=1,
        ge=1,
        le=9,
        description="gzip level of landed files: 1 is fastest (the files are staging "
        "for the Parquet compaction); 6 makes them about 20% smaller for 2.5x the CPU.",
    )
    gzip_codec: GzipCodec = Field(
        default="auto",
        description="Which library deflates landed files: isal (ISA-L, from the isal "
        "wheel: the landing path about 20% faster, files about 10% smaller), zlib (the "
        "standard library), or auto (isal when its wheel is installed, else zlib). "
        "Readers see ordinary gzip either way, and workers with different codecs may "
        "share a stream: a replay is recognised by the SHA-256 of the uncompressed lines.",
    )
    payload_format: PayloadFormat = Field(
        default="json",
        description="json: payloads are parsed (bad ones dead-lettered); raw: stored base64.",
    )
    event_id_pointer: str | None = Field(
        default=None,
        description="JSON pointer to a producer event id in the payload, e.g. /event_id.",
    )
    dedup_window: int = Field(
        default=0,
        ge=0,
        description="Per shard, drop a record whose event id was among this many recent "
        "ones (0: off; the compaction job removes producer duplicates anyway).",
    )
    sequence_pointer: str | None = Field(
        default=None,
        description="JSON pointer to the number producers stamp on each partition key's "
        "records, e.g. /seq: read by LANDER_DEDUP_KEYS here, and by the compaction, which "
        "dedupes records without an event id by it.",
    )
    dedup_keys: int = Field(
        default=0,
        ge=0,
        description="Per shard, drop a record without an event id whose number "
        "(LANDER_SEQUENCE_POINTER) was seen for its partition key: a watermark and the 64 "
        "numbers below it for each of this many recent keys (0: off). Never drops a number "
        "not seen; the compaction removes what it does not judge.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Serve /metrics, /healthz and /readyz on this port (unset: off; 0: any "
        "free port, logged).",
    )
    metrics_host: str = Field(
        default="127.0.0.1",
        description="Address the metrics server binds; 0.0.0.0 in a container so that the "
        "orchestrator and Prometheus reach it.",
    )
    advertise_host: str = Field(
        default="auto",
        description="Host or IP at which other workers reach this worker's metrics port to "
        "wake it when a lease is given or handed to it (board coordination), so a hand-off "
        "takes a fraction of a second instead of up to a beat interval. auto: "
        "LANDER_METRICS_HOST if it is a specific address, else the address the host name "
        "resolves to (the pod's or task's IP); off: never woken. Needs LANDER_METRICS_PORT.",
    )
    log_format: LogFormat = Field(
        default="auto",
        description="json: one JSON object a line; console: readable columns; auto: json "
        "unless stderr is a terminal.",
    )
    log_level: LogLevel = Field(default="info", description="Lowest level logged.")

    @model_validator(mode="before")
    @classmethod
    def _one_or_many(cls, data: Any) -> Any:
        # LANDER_STREAMS stands in for LANDER_STREAM: the field holds "" then.
        if isinstance(data, dict) and data.get("streams") and "stream" not in data:
            return {**data, "stream": ""}
        return data

    @field_validator("streams")
    @classmethod
    def _streams(cls, value: str | None) -> str | None:
        if value is not None:
            StreamChoice.parse(value)
        return value

    @model_validator(mode="after")
    def _stream_or_streams(self) -> Settings:
        if self.streams and self.stream:
            raise ValueError("set LANDER_STREAM (one stream) or LANDER_STREAMS, not both")
        if not self.streams and not self.stream:
            raise ValueError("LANDER_STREAM must be 1-128 characters of A-Z a-z 0-9 _ . -")
        return self

    @model_validator(mode="after")
    def _per_stream(self) -> Settings:
        if self.streams_file is None:
            return self
        if not self.streams:
            raise ValueError(
                "LANDER_STREAMS_FILE sets per-stream settings: it needs LANDER_STREAMS"
            )
        try:
            tables = read_streams_file(self.streams_file)
        except ValueError as exc:
            raise ValueError(f"LANDER_STREAMS_FILE {exc}") from None
        for name, table in tables:
            try:
                self._one(name if _STREAM_NAME.match(name) else "stream", table)
            except ValidationError as exc:
                raise ValueError(
                    f'LANDER_STREAMS_FILE [streams."{name}"]: {"; ".join(problems(exc))}'
                ) from None
        return self

    def _one(self, name: str, overrides: Mapping[str, str]) -> Settings:
        values = {**self.model_dump(), **overrides}
        return type(self)(**{**values, "stream": name, "streams": None, "streams_file": None})

    def for_stream(self, name: str) -> Settings:
        """The settings of one of LANDER_STREAMS' streams: these, with what
        LANDER_STREAMS_FILE sets for it."""
        if self.streams_file is None:
            return self.model_copy(update={"stream": name, "streams": None})
        return self._one(name, overrides_for(read_streams_file(self.streams_file), name))

    @property
    def stream_choice(self) -> StreamChoice | None:
        """LANDER_STREAMS parsed (None: one stream, LANDER_STREAM)."""
        return None if self.streams is None else StreamChoice.parse(self.streams)

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, value: str) -> str:
        if value and not _STREAM_NAME.match(value):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("lease_table")
    @classmethod
    def _table_name(cls, value: str) -> str:
        if not _TABLE_NAME.match(value):
            raise ValueError("must be 3-255 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("efo_consumer")
    @classmethod
    def _consumer_name(cls, value: str | None) -> str | None:
        if value is not None and not _STREAM_NAME.match(value):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("initial_position")
    @classmethod
    def _initial_position(cls, value: str) -> str:
        parse_initial_position(value)
        return value

    @field_validator("event_id_pointer", "sequence_pointer")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be a JSON pointer starting with '/', e.g. /event_id")
        return value

    @field_validator("gzip_codec")
    @classmethod
    def _codec_installed(cls, value: str) -> str:
        if value == "isal" and importlib.util.find_spec("isal") is None:
            raise ValueError("isal needs the isal wheel (pip install isal), or set zlib")
        return value

    @field_validator("archive")
    @classmethod
    def _archive(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(s3://[^/]+(/.*)?|file:///.+)$", value):
            raise ValueError("must be s3://bucket[/prefix] or file:///absolute/path")
        return value

    @field_validator("archive_tags")
    @classmethod
    def _archive_tags(cls, value: str | None) -> str | None:
        if value is not None:
            parse_tags(value)
        return value

    @field_validator("archive_expected_owner")
    @classmethod
    def _archive_owner(cls, value: str | None) -> str | None:
        return None if value is None else check_owner(value)

    @model_validator(mode="after")
    def _sequence_filter(self) -> Settings:
        if self.dedup_keys and self.sequence_pointer is None:
            raise ValueError(
                "LANDER_DEDUP_KEYS needs LANDER_SEQUENCE_POINTER: the number it remembers"
            )
        if self.sequence_pointer is not None and self.payload_format == "raw":
            raise ValueError(
                "LANDER_SEQUENCE_POINTER points into JSON payloads; with "
                "LANDER_PAYLOAD_FORMAT=raw they are base64"
            )
        return self

    @model_validator(mode="after")
    def _archive_protection(self) -> Settings:
        protection = ObjectProtection.from_settings(self)
        found = protection.problems()
        local = self.archive is not None and not self.archive.startswith("s3://")
        if not found and local and not protection.is_default:
            found.append(
                f"the LANDER_ARCHIVE_SSE, _KMS_KEY, _BUCKET_KEY, _TAGS and "
                f"_EXPECTED_OWNER settings apply to an s3:// archive, not {self.archive}"
            )
        if found:
            raise ValueError("; ".join(found))
        return self

    @field_validator("advertise_host")
    @classmethod
    def _advertise_host(cls, value: str) -> str:
        if not value or re.search(r"[\s/@?#]", value):
            raise ValueError("must be a host name or IP address, auto, or off")
        return value

    @model_validator(mode="after")
    def _wake_port(self) -> Settings:
        if self.advertise_host not in ("auto", "off") and self.metrics_port is None:
            raise ValueError(
                f"LANDER_ADVERTISE_HOST ({self.advertise_host}) needs LANDER_METRICS_PORT: "
                "other workers wake this one on that port"
            )
        return self

    @model_validator(mode="after")
    def _efo_consumer(self) -> Settings:
        if self.read_mode == "efo" and not _STREAM_NAME.match(self.consumer_name):
            raise ValueError(
                f"LANDER_EFO_CONSUMER is unset and the lease table's name "
                f"({len(self.lease_table)} characters) is no stream consumer name "
                "(1-128 characters of A-Z a-z 0-9 _ . -): set LANDER_EFO_CONSUMER"
            )
        return self

    @model_validator(mode="after")
    def _timings(self) -> Settings:
        if self.renew_seconds is not None and self.renew_seconds >= self.failover_seconds:
            raise ValueError(
                f"LANDER_RENEW_SECONDS ({self.renew_seconds:g}) must be below "
                f"LANDER_FAILOVER_SECONDS ({self.failover_seconds:g}), or leases expire "
                "between heartbeats"
            )
        return self

    @property
    def renew_interval(self) -> float:
        """The heartbeat interval in seconds."""
        return self.renew_seconds or self.failover_seconds / 3

    @property
    def consumer_name(self) -> str:
        """The stream consumer's name in efo mode."""
        return self.efo_consumer or self.lease_table

    @property
    def start_position(self) -> tuple[Sentinel, datetime | None]:
        """The initial position as a checkpoint sentinel and optional timestamp."""
        return parse_initial_position(self.initial_position)


def parse_initial_position(value: str) -> tuple[Sentinel, datetime | None]:
    """``TRIM_HORIZON``, ``LATEST`` or an ISO-8601 time (naive means UTC)."""
    upper = value.strip().upper()
    if upper in (Sentinel.TRIM_HORIZON, Sentinel.LATEST):
        return Sentinel(upper), None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError("must be TRIM_HORIZON, LATEST or an ISO-8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Sentinel.AT_TIMESTAMP, when


class ConfigError(LanderError):
    """Bad or missing configuration, with one line that names the setting."""


S = TypeVar("S", bound=BaseSettings)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and overrides (CLI flags).

    Raises :class:`ConfigError` with a single readable line; pydantic's multi-line
    report is folded so that start-up fails with one clear message.
    """
    return load_class(Settings, **overrides)


def load_class(kind: type[S], **overrides: Any) -> S:
    """Settings of class ``kind`` from the environment and overrides (None: not given).

    Every command loads its settings here, so every command also refuses a ``LANDER_*``
    variable that no command reads (:func:`unknown_variables`). All problems, unknown
    variables first, go into one :class:`ConfigError` line.
    """
    clean = {key: value for key, value in overrides.items() if value is not None}
    found = unknown_variables()
    try:
        settings = kind(**clean)
    except ValidationError as exc:
        raise ConfigError(_line([*found, *problems(exc)])) from None
    if found:
        raise ConfigError(_line(found))
    return settings


def one_line(exc: ValidationError) -> str:
    """A validation error as one line naming each LANDER_* variable."""
    return _line(problems(exc))


def _line(found: list[str]) -> str:
    return "invalid configuration: " + "; ".join(found)


def problems(exc: ValidationError) -> list[str]:
    """Each error of a validation as ``LANDER_NAME what is wrong``.

    Field errors are named by their variable. A model-level error (empty ``loc``: a
    check across fields, such as renew below failover) is taken as it is: its message
    names the variables itself. Input values are never added (pydantic's ``input``).
    """
    found = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required but not set"
        found.append(f"{PREFIX}{where.upper()} {message}" if where else message)
    return found


# -- which LANDER_* variables exist ------------------------------------------------------

SETTINGS_MODULES = ("consumer.config", "sparkjobs.settings")
"""Where the settings classes live; every ``BaseSettings`` subclass defined there counts
(as for docs/configuration.md, see docs/configdoc.py)."""

ENVIRONMENT_ONLY: dict[str, str] = {
    "LANDER_SPARK_DRIVER_MEMORY": "sparkjobs/session.py: driver memory of a local Spark "
    "session (set by docker-compose.yml and the k8s kustomizations)",
    "LANDER_SPARK_LOG_LEVEL": "sparkjobs/session.py: Spark's own log level",
    "LANDER_SPARK_CDS": "sparkjobs/session.py: the AppCDS archive of lander compact and "
    "analyse (a file, or off; default under the user's cache)",
    "LANDER_SPARK_READER_JAR": "sparkjobs/objectreader.py: the jar of the compaction's "
    "object reader (a file, or off for Spark's text reader; default built under the user's "
    "cache when javac is there)",
    "LANDER_SPARK_PROPERTIES": "sparkjobs/session.py: a Spark properties file a local "
    "session starts with (the Spark image's defaults); the job's own settings win",
    "LANDER_S3A_JARS": "tests/support/s3a.py: the folder holding the S3A jars of the tests",
}
"""Variables read straight from the environment, not through a settings class: their
readers run where no settings object exists (``get_session`` is also called by the demo,
the tests and the benchmarks), so they are known without being fields."""


@functools.cache
def known_variables() -> frozenset[str]:
    """Every ``LANDER_*`` variable some command reads: the fields of every settings class
    of every command (an environment shared by ``lander run``, ``produce``, ``compact``
    and ``analyse`` is fine), and :data:`ENVIRONMENT_ONLY`."""
    names = set(ENVIRONMENT_ONLY)
    for module_name in SETTINGS_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseSettings)
                and value.__module__ == module_name
            ):
                names.update(variables_of(value))
    return frozenset(names)


def variables_of(kind: type[BaseSettings]) -> set[str]:
    """The environment variables that set the fields of ``kind`` (upper case)."""
    return {name for field_name in kind.model_fields for name in field_variables(kind, field_name)}


def field_variables(kind: type[BaseSettings], field_name: str) -> list[str]:
    """The environment variables that set one field of ``kind`` (upper case)."""
    info = kind.model_fields[field_name]
    alias = info.validation_alias or info.alias
    if isinstance(alias, str):
        return [alias.upper()]
    if isinstance(alias, AliasChoices):
        return [choice.upper() for choice in alias.choices if isinstance(choice, str)]
    prefix = str(kind.model_config.get("env_prefix", ""))
    return [f"{prefix}{field_name}".upper()]


RENAMED: dict[str, str] = {
    "LANDER_COMPACT_LOOKBACK_MINUTES": "LANDER_COMPACT_DEDUPE_HORIZON (a duration: 90m, 24h, 1d)",
}
"""Settings that were replaced, and what replaced them: named in the error."""

REMOVED: dict[str, str] = {
    "LANDER_COORDINATION": "board coordination is the only mode now; see docs/operations.md, "
    "Upgrading from a release with scan coordination",
    "LANDER_LEASE_SCAN_SECONDS": "no worker scans the lease table to take leases any more "
    "(the leader's sweep is LANDER_LEASE_SWEEP_SECONDS)",
}
"""Settings that were dropped with nothing in their place, and why: named in the error."""


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One problem per ``LANDER_*`` variable that nothing reads, with the closest name.

    Names only: a value is never quoted. Case is ignored as pydantic-settings ignores it.
    """
    environ = os.environ if environ is None else environ
    known = known_variables()
    suffixes = sorted(name.removeprefix(PREFIX) for name in known if name.startswith(PREFIX))
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper in known:
            continue
        if upper in RENAMED:
            found.append(f"{name} is no longer a setting (replaced by {RENAMED[upper]})")
            continue
        if upper in REMOVED:
            found.append(f"{name} is no longer a setting ({REMOVED[upper]})")
            continue
        # Compare without the prefix every name shares, or anything looks close.
        close = difflib.get_close_matches(upper.removeprefix(PREFIX), suffixes, n=1)
        hint = f"did you mean {PREFIX}{close[0]}?" if close else "see docs/configuration.md"
        found.append(f"{name} is not a setting ({hint})")
    return found


class ProduceSettings(BaseSettings):
    """``lander produce``: where to write, how much and how fast (see consumer.cli.produce)."""

    model_config = SettingsConfigDict(env_prefix="LANDER_", extra="ignore", frozen=True)

    stream: str = Field(description="Name of the Kinesis data stream to write to.")
    produce_count: int = Field(default=10_000, ge=0, description="Events to produce.")
    produce_rate: float = Field(
        default=1_000.0, ge=0, description="User records a second (0: as fast as possible)."
    )
    produce_payload_size: int = Field(
        default=200, ge=0, le=900_000, description="Approximate JSON payload size in bytes."
    )
    produce_retry_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of events sent twice with the same event_id (producer retries).",
    )
    produce_aggregate_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of events packed into KPL aggregates (1: all, as --aggregate).",
    )
    produce_bad_records: int = Field(
        default=0, ge=0, description="Payloads that are not JSON or not UTF-8, spread over the run."
    )
    produce_keys: int = Field(default=64, ge=1, description="Distinct partition keys.")
    produce_seed: int = Field(
        default=0, description="Seed of the random choices (repeatable runs)."
    )
    log_format: LogFormat = Field(default="auto", description="As for lander run.")
    log_level: LogLevel = Field(default="info", description="Lowest level logged.")

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, value: str) -> str:
        return Settings._stream_name(value)


def load_produce_settings(**overrides: Any) -> ProduceSettings:
    """Like :func:`load_settings`, for ``lander produce``."""
    return load_class(ProduceSettings, **overrides)


# -- command-line flags ------------------------------------------------------------------

FlagSpec = str | tuple[str, str]
"""A field that has a flag: its name (the flag is ``--field-name``), or ``(name, flag)``
where the flag is named otherwise, e.g. ``("produce_count", "--count")``."""


class SettingFlag(argparse.Action):
    """A flag that sets the field ``dest`` of the settings class ``settings``.

    Made by :func:`add_setting_flags`. The flag stores its value as ``store`` does (as
    ``store_const`` with True for a bool field); not given, it stays None, so the
    environment decides. docs/configdoc.py reads which flag sets which variable off
    these actions.
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        settings: type[BaseSettings],
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.settings = settings

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_setting_flags(
    parser: argparse.ArgumentParser, kind: type[BaseSettings], flags: Iterable[FlagSpec]
) -> None:
    """Add one flag per field named in ``flags`` (see :data:`FlagSpec`) to ``parser``.

    Everything else comes from the field: ``dest`` is its name, the value's type its
    annotation (``int``, ``float``, ``str``, a ``Literal`` of strings, or ``None`` with one
    of them; a ``bool`` field gets a flag without value that sets it true), the help its
    description with the variable's name and the default. Collect the values with
    :func:`flag_values` and the same ``flags``.
    """
    for spec in flags:
        name, flag = spec if isinstance(spec, tuple) else (spec, "--" + spec.replace("_", "-"))
        info = kind.model_fields[name]
        value_type = _flag_type(info.annotation)
        options: dict[str, Any]
        if value_type is bool:
            if info.default is not False:
                raise ValueError(f"{kind.__name__}.{name}: a flag can only turn on a setting")
            options = {"nargs": 0, "const": True}
        else:
            options = {"type": value_type, "metavar": _metavar(flag, info.annotation)}
        parser.add_argument(
            flag,
            action=SettingFlag,
            dest=name,
            settings=kind,
            default=None,
            help=_flag_help(kind, name),
            **options,
        )


def flag_fields(flags: Iterable[FlagSpec]) -> tuple[str, ...]:
    """The field names of ``flags``."""
    return tuple(spec[0] if isinstance(spec, tuple) else spec for spec in flags)


def flag_values(args: argparse.Namespace, flags: Iterable[FlagSpec]) -> dict[str, Any]:
    """The flags' values by field name (None: not given), as :func:`load_class` takes them."""
    return {name: getattr(args, name) for name in flag_fields(flags)}


def _flag_type(annotation: Any) -> type[Any]:
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    if get_origin(annotation) in (Union, types.UnionType) and len(args) == 1:
        return _flag_type(args[0])
    if get_origin(annotation) is Literal and all(isinstance(arg, str) for arg in args):
        return str
    if annotation in (bool, int, float, str):
        return annotation  # type: ignore[no-any-return]
    raise TypeError(f"no flag for a setting of type {annotation}")


def _choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    return [choice for arg in get_args(annotation) for choice in _choices(arg)]


def _metavar(flag: str, annotation: Any) -> str:
    choices = _choices(annotation)
    if choices:
        return "{" + ",".join(choices) + "}"
    return flag.lstrip("-").replace("-", "_").upper()


def _flag_help(kind: type[BaseSettings], name: str) -> str:
    """The description and, in brackets, the variable and the default (argparse-escaped)."""
    info = kind.model_fields[name]
    description = (info.description or name.replace("_", " ")).strip().rstrip(".")
    note = ", ".join(field_variables(kind, name))
    default = info.default
    if (
        default not in (None, PydanticUndefined)
        and not isinstance(default, bool)
        and "default" not in description.lower()
    ):
        note += f", default {default:g}" if isinstance(default, float) else f", default {default}"
    return f"{description} ({note})".replace("%", "%%")
