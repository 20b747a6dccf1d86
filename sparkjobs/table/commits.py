"""The table's own changes, each in a commit of its own before a run's data: the typed
payload columns (:func:`evolve_payload`), the partitions and the event time
(:func:`evolve_partitions`), required columns made optional for an import
(:func:`relax_required`). Each reads the table again and retries when another writer
committed first (:func:`_until_committed`); none changes a table that has it already.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sparkjobs.catalog import TableRef, one_line
from sparkjobs.table.columns import PAYLOAD, RESCUED
from sparkjobs.table.table import (
    COMMIT_ATTEMPTS,
    EVENT_PARTITION,
    EVENT_POINTER,
    EVENT_TS,
    PARTITION,
    PARTITIONS,
    CommitConflictError,
    log,
    open_table,
    payload_schema,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from sparkjobs.table.payload import Struct


def evolve_payload(
    ref: TableRef, schema: Struct, properties: Mapping[str, str] | None = None
) -> bool:
    """Give the table the typed columns of ``schema`` in a commit of its own (new fields
    get fresh ids, widened ones are promoted, nothing else changes); whether it changed.

    ``schema`` holds every column the table has (:func:`sparkjobs.table.evolve.evolve`
    only grows), so the union is the new schema; a table that has it already is left
    alone (a re-run adds no schema version). A field is required only where the table
    has it required too, or has no ``payload`` column yet: a run that made the column
    while another did may not add a required one, and the union never tightens one.
    """
    from pyiceberg.schema import Schema as IcebergSchema
    from pyiceberg.types import NestedField, StringType

    from sparkjobs.table.payload import required_paths, with_required
    from sparkjobs.table.payload_columns import to_iceberg

    def change(table: Table) -> Callable[[], None] | None:
        names = {f.name for f in table.schema().fields}
        current = payload_schema(table)
        required = required_paths(schema)
        if current is not None:
            required &= required_paths(current)
        target = with_required(schema, required)
        if current == target and RESCUED in names:
            return None
        wanted = IcebergSchema(
            NestedField(1, PAYLOAD, to_iceberg(target, 3), required=False),
            NestedField(2, RESCUED, StringType(), required=False),
        )

        def commit() -> None:
            with table.update_schema() as update:
                update.union_by_name(wanted)

        return commit

    return _until_committed(ref, properties, "schema", change)


def evolve_partitions(
    ref: TableRef,
    partition: str,
    properties: Mapping[str, str] | None = None,
    *,
    event_pointer: str | None = None,
) -> bool:
    """Give the table the partition fields of ``partition`` (:data:`PARTITIONS`), and with
    ``event_pointer`` the ``event_ts`` column and the pointer it was read by (the property
    :data:`EVENT_POINTER`, which the analysis checks), in a commit of its own; whether it
    changed.

    Iceberg's partition evolution: files keep the spec they were written with, the
    hours a run rewrites take the new one, and readers prune each file by its own.
    """
    from pyiceberg.transforms import DayTransform, HourTransform, Transform
    from pyiceberg.types import TimestamptzType

    wanted = set(PARTITIONS[partition])
    transforms: dict[str, tuple[str, Transform[Any, Any]]] = {
        PARTITION: ("arrival_ts", HourTransform()),
        EVENT_PARTITION: (EVENT_TS, DayTransform()),
    }

    def change(table: Table) -> Callable[[], None] | None:
        names = {f.name for f in table.schema().fields}
        has_column = event_pointer is None or EVENT_TS in names
        fields = {f.name for f in table.spec().fields}
        same_pointer = event_pointer is None or table.properties.get(EVENT_POINTER) == event_pointer
        if has_column and fields == wanted and same_pointer:
            return None

        def commit() -> None:
            with table.transaction() as transaction:
                if event_pointer is not None and not same_pointer:
                    transaction.set_properties({EVENT_POINTER: event_pointer})
                if not has_column:
                    with transaction.update_schema() as update:
                        update.add_column(
                            EVENT_TS, TimestamptzType(), doc="the payload's event time"
                        )
                if fields != wanted:
                    with transaction.update_spec() as spec:
                        for name in sorted(fields - wanted):
                            spec.remove_field(name)
                        for name in sorted(wanted - fields):
                            source, transform = transforms[name]
                            spec.add_field(source, transform, name)

        return commit

    return _until_committed(ref, properties, "partition", change)


def relax_required(ref: TableRef) -> bool:
    """Make the table's required columns optional (a commit; Iceberg's safe change):
    files that were not written as required (an import) may then join it; whether it
    changed."""

    def change(table: Table) -> Callable[[], None] | None:
        required = [f.name for f in table.schema().fields if f.required]
        if not required:
            return None

        def commit() -> None:
            with table.update_schema() as update:
                for name in required:
                    update.make_column_optional(name)

        return commit

    return _until_committed(ref, None, "schema", change)


def _until_committed(
    ref: TableRef,
    properties: Mapping[str, str] | None,
    what: str,
    change: Callable[[Table], Callable[[], None] | None],
) -> bool:
    """Read the table and make ``change``'s commit (None: nothing to change) until one
    is not in conflict with another writer's; whether anything changed.
    :class:`CommitConflictError` after :data:`COMMIT_ATTEMPTS` conflicts."""
    from pyiceberg.exceptions import CommitFailedException

    for _ in range(COMMIT_ATTEMPTS):
        table = open_table(ref, properties)
        assert table is not None
        commit = change(table)
        if commit is None:
            return False
        try:
            commit()
        except CommitFailedException as exc:
            log.warning(f"{what} commit conflicted; reading the table again", error=one_line(exc))
            continue
        return True
    raise CommitConflictError(
        f"table {ref.identifier}: {COMMIT_ATTEMPTS} {what} commits conflicted with other writers"
    )
