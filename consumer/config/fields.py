"""The building blocks of every settings class: the prefix, value types and checks.

Choices are case-insensitive (:data:`CaseInsensitive` on a ``Literal`` of lower-case
choices); names and pointers are checked the same way wherever they appear.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator
from pydantic_settings import SettingsConfigDict

PREFIX = "LANDER_"
CONFIG = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", frozen=True)
"""Every settings class reads ``LANDER_*`` variables and is immutable."""

STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


CaseInsensitive = BeforeValidator(_lower)
"""Put on a ``Literal`` of lower-case choices: the value is lower-cased before the check."""

LogFormat = Annotated[Literal["auto", "json", "console"], CaseInsensitive]
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], CaseInsensitive]
PayloadFormat = Annotated[Literal["json", "raw"], CaseInsensitive]
GzipCodec = Annotated[Literal["auto", "zlib", "isal"], CaseInsensitive]
ReadMode = Annotated[Literal["polling", "efo"], CaseInsensitive]
"""The read modes' names: ``consumer.stream.modes.MODES`` registers one mode per name
(tests/stream/test_read_modes.py holds the two equal)."""
ArchiveSse = Annotated[Literal["none", "sse-s3", "sse-kms"], CaseInsensitive]


def check_stream_name(value: str) -> str:
    """A Kinesis stream (or stream consumer) name; empty passes (not set)."""
    if value and not STREAM_NAME.match(value):
        raise ValueError("must be 1-128 characters of A-Z a-z 0-9 _ . -")
    return value


def check_pointer(value: str | None) -> str | None:
    """A JSON pointer into the payload (None: not set)."""
    if value is not None and not value.startswith("/"):
        raise ValueError("must be a JSON pointer starting with '/', e.g. /event_id")
    return value
