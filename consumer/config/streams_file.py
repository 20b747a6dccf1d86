"""``LANDER_STREAMS_FILE``: the settings that differ between the streams of one fleet.

A TOML file with one table per stream name or pattern::

    [streams.orders]
    archive = "s3://archive/orders"
    event_id_pointer = "/order_id"

    [streams."clicks-*"]
    payload_format = "raw"
    initial_position = "LATEST"

A stream takes the table named exactly after it, else the first table (in file order)
whose pattern matches it, else none: every other setting, and every setting a table
does not name, comes from the environment as for one stream. Only the settings in
:data:`PER_STREAM` may differ. The file is read and every table validated at start
(:meth:`consumer.config.Settings` refuses it in one line); a stream opened later
reads it again.
"""

from __future__ import annotations

import tomllib
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from consumer.stream.streams import StreamChoice

PER_STREAM = (
    "archive",
    "payload_format",
    "event_id_pointer",
    "sequence_pointer",
    "initial_position",
    "payload_schema",
    "event_time_pointer",
)
"""The settings a stream may set for itself (LANDER_ARCHIVE, ...; payload_schema and
event_time_pointer are the batch jobs', LANDER_PAYLOAD_SCHEMA and
LANDER_EVENT_TIME_POINTER: the workers ignore them)."""


def read_streams_file(path: str) -> list[tuple[str, dict[str, str]]]:
    """The file's tables, in order; ValueError names what is wrong, in one line."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not TOML: {exc}") from None
    other = sorted(set(data) - {"streams"})
    if other:
        raise ValueError(
            f"{path}: unexpected {', '.join(other)}: every table goes under "
            '[streams."NAME-OR-PATTERN"]'
        )
    streams: Any = data.get("streams", {})
    tables: list[tuple[str, dict[str, str]]] = []
    for name, table in streams.items():
        if not isinstance(table, dict):
            # ValueError, not TypeError: pydantic reports only ValueError as a setting's error.
            raise ValueError(f'{path}: streams.{name} must be a table ([streams."{name}"])')  # noqa: TRY004
        if name.startswith("arn:"):
            raise ValueError(f'{path}: [streams."{name}"]: name the stream, not its ARN')
        try:
            StreamChoice.parse(name)
        except ValueError as exc:
            raise ValueError(f'{path}: [streams."{name}"]: {exc}') from None
        unknown = sorted(set(table) - set(PER_STREAM))
        if unknown:
            raise ValueError(
                f'{path}: [streams."{name}"] sets {", ".join(unknown)}; a stream may set '
                f"only {', '.join(PER_STREAM)}"
            )
        for key, value in table.items():
            if not isinstance(value, str):
                raise ValueError(f'{path}: [streams."{name}"] {key} must be a string')  # noqa: TRY004
        tables.append((name, dict(table)))
    return tables


def overrides_for(tables: list[tuple[str, dict[str, str]]], stream: str) -> dict[str, str]:
    """The table a stream takes: its own name's, else the first pattern that matches."""
    for name, table in tables:
        if name == stream:
            return table
    for name, table in tables:
        if fnmatchcase(stream, name):
            return table
    return {}
