"""The worker's settings (``lander run``, ``lander status``): one object, from
``LANDER_*`` environment variables and flags; see docs/configuration.md.

The streams, the lease table and its timings, the read mode and the metrics server are
declared here; the landing side (:class:`~consumer.config.landing.LandingSettings`) and
what the batch jobs share (:mod:`consumer.config.shared`) are mixed in.

AWS endpoints, region and credentials are deliberately *not* settings: botocore reads
``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_KINESIS`` (``_DYNAMODB``,
``_S3``) and the credential chain itself, so pointing the daemon at an emulator needs
no project-specific switch.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from consumer.config.fields import (
    CONFIG,
    STREAM_NAME,
    TABLE_NAME,
    ReadMode,
    check_stream_name,
)
from consumer.config.landing import LandingSettings
from consumer.config.loading import load_class, problems
from consumer.config.shared import Logging
from consumer.config.streams_file import overrides_for, read_streams_file
from consumer.sequence import Sentinel
from consumer.stream.streams import StreamChoice


def default_worker_id() -> str:
    """Hostname, pid and a random suffix: unique per process start, readable in
    ``lander status``. Hostname and pid alone repeat across containers with host
    networking (pid 1 in each), as KCL's UUIDs do not."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Settings(LandingSettings, Logging):
    """Everything a worker needs to know; see docs/configuration.md."""

    model_config = CONFIG

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
    effects_table: str | None = Field(
        default=None,
        description="DynamoDB table of the effects processors run once per key "
        "(consumer.effects; default: the lease table's name with -effects), created on "
        "first use with TTL on expiresAt.",
    )
    effects_ttl_seconds: int = Field(
        default=7 * 24 * 3600,
        ge=60,
        description="How long an effect's record is kept (and a repeat recognised): "
        "longer than the stream's retention, so any record it can deliver again meets it.",
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
                self._one(name if STREAM_NAME.match(name) else "stream", table)
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
        return check_stream_name(value)

    @property
    def effects_table_name(self) -> str:
        """LANDER_EFFECTS_TABLE, or the lease table's name with ``-effects``."""
        return self.effects_table or f"{self.lease_table}-effects"

    @field_validator("lease_table", "effects_table")
    @classmethod
    def _table_name(cls, value: str | None) -> str | None:
        if value is not None and not TABLE_NAME.match(value):
            raise ValueError("must be 3-255 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("efo_consumer")
    @classmethod
    def _consumer_name(cls, value: str | None) -> str | None:
        if value is not None and not STREAM_NAME.match(value):
            raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ . -")
        return value

    @field_validator("initial_position")
    @classmethod
    def _initial_position(cls, value: str) -> str:
        parse_initial_position(value)
        return value

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
        if self.read_mode == "efo" and not STREAM_NAME.match(self.consumer_name):
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


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and overrides (CLI flags).

    Raises :class:`~consumer.config.loading.ConfigError` with a single readable line;
    pydantic's multi-line report is folded so that start-up fails with one clear message.
    """
    return load_class(Settings, **overrides)
