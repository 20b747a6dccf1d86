"""The compacted output as an Apache Iceberg table: the table, one commit per run.

Spark writes a run's Parquet (:mod:`sparkjobs.compaction.sparkplan`); ``pyiceberg`` publishes it:

- **Table.** One per stream in the catalog :mod:`sparkjobs.catalog` names, format v2.
  Partitioned by ``hour(arrival_ts)``:
  every file Spark writes holds one arrival hour, so pyiceberg derives each file's
  partition from its own statistics, and readers filtering on ``arrival_ts`` prune hours
  without knowing about partitions. Sorted by ``shard_id`` (within a shard the files
  follow the sequence number's numeric order, which Iceberg's string order cannot
  state).
- **Commit.** A run replaces exactly the hours it rewrote in one snapshot (Iceberg
  calls it an ``append`` when no old file went, an ``overwrite`` when some did):
  the hours' old files out, the new files in, and one summary entry per hour recording
  what it was made from (:mod:`sparkjobs.table.publish`). A concurrent commit to the same
  hours fails pyiceberg's validation; the run then keeps only the hours it still wins
  and commits again (:func:`replace_hours`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from consumer.errors import LanderError
from sparkjobs.catalog import (
    CatalogError,
    TableRef,
    embedded_missing,
    one_line,
    open_catalog,
    registered,
)
from sparkjobs.table.columns import COMPACTED_COLUMNS, PAYLOAD
from sparkjobs.table.publish import HourEntry, entries_from_summaries, summary_of, winning_hours
from sparkjobs.window import HOUR, parse_hour

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from sparkjobs.table.payload import Struct

log = structlog.get_logger("sparkjobs.table")

PARTITION = "arrival_ts_hour"
EVENT_TS = "event_ts"
"""The payload's event time (:mod:`sparkjobs.compaction.eventtime`), a column of its own."""
EVENT_PARTITION = "event_ts_day"
EVENT_POINTER = "lander.event-time-pointer"
"""The table property naming the pointer ``event_ts`` was last read by."""
PARTITIONS: dict[str, tuple[str, ...]] = {
    "arrival_hour": (PARTITION,),
    "arrival_hour,event_day": (PARTITION, EVENT_PARTITION),
    "event_day": (EVENT_PARTITION,),
}
"""``LANDER_COMPACT_PARTITION``'s values, and the table's partition fields for each."""


def by_event_day(partition: str) -> bool:
    """Whether ``partition`` (a key of :data:`PARTITIONS`) partitions by event day, so a
    run's files are split by it."""
    return EVENT_PARTITION in PARTITIONS[partition]


COMMIT_ATTEMPTS = 5
"""Re-plans after a conflicting commit before the run gives up (each re-plan drops the
hours another run published from a newer listing, so few are ever needed)."""


class CommitConflictError(LanderError):
    """Each of a run's :data:`COMMIT_ATTEMPTS` commits conflicted with another writer's:
    retriable, as a later run finds the table settled (until it had a class of its own
    it was a :class:`CatalogError`, a bad setting, which it is not; nothing caught it
    as one)."""

    retriable = True


def iceberg_schema() -> Schema:
    """The table's columns (:data:`~sparkjobs.table.columns.COMPACTED_COLUMNS`): those every
    landed record has (stream, shard, position, arrival) required, the rest optional.

    A run writes the required ones as required Parquet fields
    (:func:`sparkjobs.table.schema.written`); a table made before they were required keeps
    them optional (a required file reads into an optional column, never the reverse)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    kinds = {"string": StringType(), "long": LongType(), "timestamp": TimestamptzType()}
    return Schema(
        *(
            NestedField(field_id, name, kinds[kind], required=not nullable)
            for field_id, (name, kind, nullable) in enumerate(COMPACTED_COLUMNS, start=1)
        )
    )


def payload_schema(table: Table) -> Struct | None:
    """The table's ``payload`` column as a payload type (None before a typed run)."""
    from sparkjobs.table.payload import Struct
    from sparkjobs.table.payload_columns import from_iceberg

    names = {f.name: f for f in table.schema().fields}
    if PAYLOAD not in names:
        return None
    found = from_iceberg(names[PAYLOAD].field_type)
    return found if isinstance(found, Struct) else None


def open_table(
    ref: TableRef, properties: Mapping[str, str] | None = None, *, create: bool = True
) -> Table | None:
    """The stream's table; made on first use when ``create`` (else None if missing).

    ``properties``: the writer's settings recorded on a new table (target file size,
    compression). An existing table whose columns differ is refused: it is not ours.
    """
    from pyiceberg.exceptions import NoSuchTableError

    if not create and embedded_missing(ref.catalog, ref.output):
        return None
    catalog = open_catalog(ref.catalog, ref.output)
    try:
        table = catalog.load_table(ref.identifier)
    except NoSuchTableError:
        if not create:
            return None
        table = _create(catalog, ref, properties or {})
    _check_columns(ref, table)
    return table


def _create(catalog: Catalog, ref: TableRef, properties: Mapping[str, str]) -> Table:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
    from pyiceberg.transforms import HourTransform, IdentityTransform

    schema = iceberg_schema()
    arrival = schema.find_field("arrival_ts").field_id
    spec = PartitionSpec(
        PartitionField(source_id=arrival, field_id=1000, transform=HourTransform(), name=PARTITION)
    )
    order = SortOrder(
        SortField(
            source_id=schema.find_field("shard_id").field_id,
            transform=IdentityTransform(),
            direction=SortDirection.ASC,
            null_order=NullOrder.NULLS_FIRST,
        )
    )
    namespace = ref.identifier.rsplit(".", 1)[0]
    for attempt in range(3):  # another run may make the namespace at the same moment
        try:
            catalog.create_namespace_if_not_exists(namespace)
            break
        except Exception:  # the backend's race error, whichever it is: tried twice more
            if attempt == 2:
                raise
            time.sleep(0.1)
    return catalog.create_table_if_not_exists(
        ref.identifier,
        schema,
        location=ref.location,
        partition_spec=spec,
        sort_order=order,
        properties={
            "format-version": "2",
            "schema.name-mapping.default": schema.name_mapping.model_dump_json(),
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "100",
            "lander.stream": ref.stream,
            **properties,
        },
    )


def _check_columns(ref: TableRef, table: Table) -> None:
    have = {f.name: str(f.field_type) for f in table.schema().fields}
    want = {f.name: str(f.field_type) for f in iceberg_schema().fields}
    missing = {name: kind for name, kind in want.items() if have.get(name) != kind}
    if missing:
        raise CatalogError(
            f"table {ref.identifier} exists without the compacted columns "
            f"{', '.join(f'{n} {k}' for n, k in sorted(missing.items()))}: name another "
            "table with LANDER_TABLE"
        )


def published(table: Table, hours: Iterable[str] | None = None) -> dict[str, HourEntry]:
    """Each hour's entry now: the newest among the current snapshot and its ancestors."""
    from pyiceberg.table.snapshots import ancestors_of

    snapshots = ancestors_of(table.current_snapshot(), table.metadata)
    return entries_from_summaries(
        (dict(s.summary.additional_properties) if s.summary else {} for s in snapshots), hours
    )


def hours_filter(hours: Iterable[str]) -> BooleanExpression:
    """Rows whose ``arrival_ts`` lies in one of ``hours`` (contiguous hours as one range)."""
    from pyiceberg.expressions import AlwaysFalse, Or
    from pyiceberg.expressions.parser import parse

    expression: BooleanExpression = AlwaysFalse()
    for start, end in _ranges(sorted(parse_hour(h) for h in set(hours))):
        between = f"arrival_ts >= '{start.isoformat()}' AND arrival_ts < '{end.isoformat()}'"
        expression = Or(expression, parse(between))
    return expression


def _ranges(starts: list[datetime]) -> list[tuple[datetime, datetime]]:
    ranges: list[tuple[datetime, datetime]] = []
    for start in starts:
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], start + HOUR)
        else:
            ranges.append((start, start + HOUR))
    return ranges


def files_of(table: Table, hours: Iterable[str]) -> list[str]:
    """The data files that are ``hours`` now."""
    hours = list(hours)
    if not hours or table.current_snapshot() is None:
        return []
    return sorted(task.file.file_path for task in table.scan(hours_filter(hours)).plan_files())


@dataclass(frozen=True, slots=True)
class Committed:
    """What a run's commit published: its hours, and those another run won meanwhile."""

    hours: list[str]
    superseded: list[str]
    snapshot_id: int | None
    attempts: int


def replace_hours(
    ref: TableRef,
    entries: Mapping[str, HourEntry],
    files: Mapping[str, list[str]],
    run_id: str,
    properties: Mapping[str, str] | None = None,
    *,
    keep_files: bool = False,
) -> Committed:
    """Publish a run: each hour of ``entries`` becomes exactly ``files[hour]`` (none for
    an hour that kept no row), in one snapshot whose summary records the entries.

    On a conflict (another run committed some of these hours since this one read the
    table) the table is read again and only the hours this run still wins are committed;
    the files of the others are deleted, never published (kept with ``keep_files``:
    an import registers files it did not write).
    """
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    pending = dict(entries)
    superseded: list[str] = []
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = open_table(ref, properties)
        assert table is not None
        current = published(table, pending)
        wins = winning_hours(pending, current)
        lost = sorted(set(pending) - set(wins))
        if lost:
            superseded.extend(lost)
            if not keep_files:
                _delete_files(table, [f for hour in lost for f in files.get(hour, [])])
            log.info("hours published meanwhile by a newer listing", hours=lost, run_id=run_id)
            pending = {hour: pending[hour] for hour in wins}
        if not pending:
            return Committed([], sorted(superseded), None, attempt)
        try:
            snapshot = _overwrite(table, pending, files, run_id, sorted_files=not keep_files)
        except (CommitFailedException, ValidationException) as exc:
            log.warning("commit conflicted; reading the table again", error=one_line(exc))
            continue
        return Committed(sorted(pending), sorted(superseded), snapshot, attempt)
    raise CommitConflictError(
        f"table {ref.identifier}: {COMMIT_ATTEMPTS} commits conflicted with other writers"
    )


def _overwrite(
    table: Table,
    entries: Mapping[str, HourEntry],
    files: Mapping[str, list[str]],
    run_id: str,
    *,
    sorted_files: bool,
) -> int | None:
    """One snapshot: ``entries``' hours replaced by ``files``; with ``sorted_files``
    (the job wrote them, rows by shard and sequence) each data file names the table's
    sort order, as Iceberg's writers do, so engines may rely on it."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    hours = sorted(entries)
    old = []
    if table.current_snapshot() is not None:
        old = [task.file for task in table.scan(hours_filter(hours)).plan_files()]
    transaction = table.transaction()
    summary = summary_of(run_id, entries.values())
    with transaction.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
        overwrite.delete_by_predicate(hours_filter(hours))
        for data_file in old:
            overwrite.delete_data_file(data_file)
        for hour in hours:
            for path in files.get(hour, []):
                data_file = parquet_file_to_data_file(table.io, table.metadata, registered(path))
                if sorted_files:
                    data_file = _sorted_by(data_file, table.sort_order().order_id)
                overwrite.append_data_file(data_file)
    committed = transaction.commit_transaction()
    current = committed.current_snapshot()
    return current.snapshot_id if current else None


def _sorted_by(data_file: DataFile, order_id: int) -> DataFile:
    """``data_file`` naming sort order ``order_id`` (pyiceberg's reader of a Parquet
    file's statistics leaves it unset, and its fields have no setters)."""
    from pyiceberg.manifest import DATA_FILE_TYPE, DEFAULT_READ_VERSION

    names = [field.name for field in DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields]
    data_file[names.index("sort_order_id")] = order_id
    return data_file


def _delete_files(table: Table, paths: list[str]) -> None:
    for path in paths:
        try:
            table.io.delete(registered(path))
        except Exception as exc:  # best effort: maintenance removes what stays
            log.warning("could not delete an unpublished file", file=path, error=one_line(exc))
