"""``lander produce``: the load generator's settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from consumer.config.fields import CONFIG, check_stream_name
from consumer.config.loading import load_class
from consumer.config.shared import Logging


class ProduceSettings(Logging):
    """``lander produce``: where to write, how much and how fast (see consumer.cli.produce)."""

    model_config = CONFIG

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

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, value: str) -> str:
        return check_stream_name(value)


def load_produce_settings(**overrides: Any) -> ProduceSettings:
    """Like :func:`load_settings`, for ``lander produce``."""
    return load_class(ProduceSettings, **overrides)
