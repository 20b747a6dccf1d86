"""An archive folder (``file://``) read with the codec and :func:`.envelope.parse_line` only.

For the demo, the benchmarks and the tests: an independent check of what the lander
wrote, using none of its writing code. It reads whole objects; a truncated or damaged
one raises (the Spark jobs have the tolerant reader).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumer.archive.codec import open_lines
from consumer.archive.envelope import LandedLine, LineError, parse_line
from consumer.archive.layout import DEAD_LETTER, SUFFIX, LandedKey, parse_key, stream_folder


@dataclass(frozen=True, slots=True)
class LandedObject:
    """One landed object: where it is, what its key says, and its lines."""

    path: Path
    key: LandedKey
    lines: list[LandedLine]


def data_paths(root: Path, stream: str) -> list[Path]:
    """Every landed data object of ``stream`` under an archive folder, sorted."""
    return sorted((root / stream_folder(stream)).rglob(f"*{SUFFIX}"))


def dead_letter_paths(root: Path, stream: str) -> list[Path]:
    """Every dead-letter object of ``stream`` under an archive folder, sorted."""
    return sorted((root / DEAD_LETTER / stream_folder(stream)).rglob(f"*{SUFFIX}"))


def read_object(path: Path) -> LandedObject:
    """One data object, every line parsed; ValueError if its key or a line is not
    the archive's."""
    key = parse_key(path.as_posix())
    if key is None:
        raise ValueError(f"not a landed object's key: {path}")
    with open_lines(path) as handle:
        lines = [parse_line(raw) for raw in handle]
    return LandedObject(path, key, lines)


def read_archive(root: Path, stream: str) -> Iterator[LandedObject]:
    """Every data object of ``stream``, in key order."""
    for path in data_paths(root, stream):
        yield read_object(path)


def read_dead_letters(path: Path) -> Iterator[dict[str, Any]]:
    """The dead letters of one object, as JSON objects."""
    with open_lines(path) as handle:
        for raw in handle:
            document = json.loads(raw)
            if not isinstance(document, dict):
                raise LineError(f"not a dead letter in {path}")
            yield document
