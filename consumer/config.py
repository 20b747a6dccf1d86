"""Settings: one object, from ``LANDER_*`` environment variables and CLI flags.

AWS endpoints, region and credentials are deliberately *not* settings here: botocore
reads ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_KINESIS`` (``_DYNAMODB``,
``_S3``) and the credential chain itself, so pointing the daemon at an emulator needs
no project-specific switch.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from consumer.sequence import Sentinel

_STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")


def default_worker_id() -> str:
    """Hostname and pid: unique per process, readable in ``lander status``."""
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    """Everything a worker needs to know; see docs/configuration.md."""

    model_config = SettingsConfigDict(env_prefix="LANDER_", extra="ignore", frozen=True)

    stream: str = Field(description="Name of the Kinesis data stream to consume.")
    lease_table: str = Field(description="DynamoDB table holding one lease per shard.")
    archive: str | None = Field(
        default=None,
        description="Where the lander writes: s3://bucket/prefix or file:///path.",
    )
    worker_id: str = Field(
        default_factory=default_worker_id,
        description="This worker's name in the lease table (default: hostname-pid).",
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
    lease_scan_seconds: float | None = Field(
        default=None,
        gt=0,
        description="How often the lease table is scanned to take, balance and observe "
        "leases (default: 1 s, or half the heartbeat if that is shorter). Bounds how fast "
        "a released lease is picked up, and how late an expiry is noticed.",
    )
    shard_sync_seconds: float = Field(
        default=30.0, gt=0, description="How often the stream's shards are listed."
    )
    poll_idle_seconds: float = Field(
        default=1.0,
        ge=0.2,
        description="Wait between GetRecords calls on a shard that is caught up.",
    )
    max_records_per_call: int = Field(
        default=10_000, ge=1, le=10_000, description="GetRecords Limit."
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
    payload_format: Literal["json", "raw"] = Field(
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
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto",
        description="json: one JSON object a line; console: readable columns; auto: json "
        "unless stderr is a terminal.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged."
    )

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, value: str) -> str:
        if not _STREAM_NAME.match(value):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("lease_table")
    @classmethod
    def _table_name(cls, value: str) -> str:
        if not _TABLE_NAME.match(value):
            raise ValueError("must be 3-255 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("initial_position")
    @classmethod
    def _initial_position(cls, value: str) -> str:
        parse_initial_position(value)
        return value

    @field_validator("event_id_pointer")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("must be a JSON pointer starting with '/', e.g. /event_id")
        return value

    @field_validator("archive")
    @classmethod
    def _archive(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^(s3://[^/]+(/.*)?|file:///.+)$", value):
            raise ValueError("must be s3://bucket[/prefix] or file:///absolute/path")
        return value

    @model_validator(mode="after")
    def _timings(self) -> Settings:
        if self.renew_seconds is not None and self.renew_seconds >= self.failover_seconds:
            raise ValueError(
                f"renew_seconds ({self.renew_seconds}) must be below failover_seconds "
                f"({self.failover_seconds}), or leases expire between heartbeats"
            )
        return self

    @property
    def renew_interval(self) -> float:
        """The heartbeat interval in seconds."""
        return self.renew_seconds or self.failover_seconds / 3

    @property
    def scan_interval(self) -> float:
        """Seconds between lease-table scans.

        A worker notices a still counter only when it scans, so takeover after a crash
        takes up to failover + one scan; keeping the scan at most half a heartbeat
        keeps that within failover + renew.
        """
        return self.lease_scan_seconds or min(1.0, self.renew_interval / 2)

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


class ConfigError(Exception):
    """Bad or missing configuration, with one line that names the setting."""


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and overrides (CLI flags).

    Raises :class:`ConfigError` with a single readable line; pydantic's multi-line
    report is folded so that start-up fails with one clear message.
    """
    clean = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**clean)
    except ValidationError as exc:
        raise ConfigError(one_line(exc)) from None


def one_line(exc: ValidationError) -> str:
    """A validation error as one line naming each LANDER_* variable."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        name = f"LANDER_{where.upper()}" if where else "settings"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required but not set"
        problems.append(f"{name} {message}")
    return "invalid configuration: " + "; ".join(problems)


class ProduceSettings(BaseSettings):
    """``lander produce``: where to write, how much and how fast (see consumer.produce)."""

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
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto", description="As for lander run."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest level logged."
    )

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, value: str) -> str:
        return Settings._stream_name(value)


def load_produce_settings(**overrides: Any) -> ProduceSettings:
    """Like :func:`load_settings`, for ``lander produce``."""
    clean = {key: value for key, value in overrides.items() if value is not None}
    try:
        return ProduceSettings(**clean)
    except ValidationError as exc:
        raise ConfigError(one_line(exc)) from None
