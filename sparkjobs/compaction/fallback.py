"""The integrity fallback: when the trusting read fails, check every object, keep the sound.

The fast path reads a window trusting the gzip streams, and a damaged one fails the
read. Only then is every input object classified on the executors
(:func:`check_partition`, with :mod:`consumer.archive.codec`) and sorted here
(:func:`triage`): ``ok`` objects are read again, the complete lines of ``truncated``
ones are recovered, ``corrupt`` ones are left out; both kinds are reported.

No pyspark import: the session is only called, and :func:`check_partition` runs on
executors from the shipped ``sparkjobs`` package.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from consumer.archive.codec import GLOB, FileCheck, check_object, recover_lines
from consumer.archive.layout import parse_relative
from sparkjobs.table.manifest import BadFile
from sparkjobs.table.publish import InputFile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Checked = tuple[str, int, str, list[str]]
"""One object's check: status, complete lines, reason, the lines recovered if truncated."""

VANISHED: Checked = ("corrupt", 0, "vanished before it was read", [])
"""What an object listed but not found by the check counts as."""

SavedLine = tuple[str, str, datetime]
"""A line recovered from a truncated object: its key, the line, the object's mtime."""


def check_partition(rows: Iterable[Any]) -> Iterator[tuple[str, str, int, str, list[str]]]:
    """Executor side: classify each object; recover the lines of truncated ones."""
    for row in rows:
        where = parse_relative(row.path)
        if where is None:
            continue
        body = bytes(row.content)
        check: FileCheck = check_object(body)
        recovered = recover_lines(body) if check.status == "truncated" else []
        yield where.rel, check.status, check.lines, check.reason, recovered


def check_inputs(spark: SparkSession, folders: list[str]) -> dict[str, Checked]:
    """Every landed object under ``folders``, checked, by key relative to the stream."""
    frame = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", GLOB)
        .load(folders)
    )
    checked = frame.select("path", "content").rdd.mapPartitions(check_partition).collect()
    return {
        rel: (status, lines, reason, recovered) for rel, status, lines, reason, recovered in checked
    }


@dataclass(slots=True)
class Triage:
    """The objects of a run after the check: what to read, what to save, what to report."""

    good: list[str] = field(default_factory=list)
    """Keys of whole objects, read again."""
    saved: list[SavedLine] = field(default_factory=list)
    """The complete lines of truncated objects."""
    bad: list[BadFile] = field(default_factory=list)
    """Truncated and corrupt objects, for the manifest."""


def triage(read: Mapping[str, InputFile], checks: Mapping[str, Checked]) -> Triage:
    """Sort the objects a run reads (``read``) by their check; a missing one is corrupt."""
    found = Triage()
    for rel, item in sorted(read.items()):
        status, count, reason, recovered = checks.get(rel, VANISHED)
        if status == "ok":
            found.good.append(rel)
            continue
        found.bad.append(BadFile(rel, status, count, reason))
        if status == "truncated":
            when = datetime.fromtimestamp(item.modified_ms / 1000, UTC)
            found.saved.extend((rel, line, when) for line in recovered)
    return found
