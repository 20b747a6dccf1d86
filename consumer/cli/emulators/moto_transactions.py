"""TransactWriteItems on the embedded moto without a copy of every table it touches.

moto backs up each table a transaction names with ``copy.deepcopy`` before it starts,
to put it back if the transaction is cancelled: every call costs time in proportion to
the tables' sizes, inside the server's one lock (:mod:`.moto_server`). The effects
table (:mod:`consumer.effects`) writes every record in a transaction, so a table of a
few thousand records makes each call take 0.1 s and more, and every other DynamoDB
call waits behind it (the chaos run's effects mode came to four events a second).

A transaction whose conditions all hold against the items as they are, with a single
Put or Delete beside condition checks, cannot need its rollback: checks write nothing,
and the one write either happens or fails whole. :func:`install` runs those without
the backup (moto's own code, with its table copies made no-ops); every other
transaction, any that cancels included, takes moto's path unchanged. Requests are
serialised (one lock), so the items cannot change between the check and the call.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from moto.dynamodb import models
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

_INSTALLED = False


def _key(backend: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def needs_no_backup(backend: Any, transact_items: list[dict[str, Any]]) -> bool:
    """Whether the transaction is condition checks and at most one Put or Delete, on
    distinct items, every condition holding now (moto's own checks, in its terms)."""
    writes = 0
    seen: set[tuple[str, str]] = set()
    try:
        for entry in transact_items:
            if len(entry) != 1:
                return False
            op_type, op = next(iter(entry.items()))
            if op_type not in ("ConditionCheck", "Put", "Delete"):
                return False
            writes += op_type != "ConditionCheck"
            key = _key(backend, op_type, op)
            target = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if target in seen:
                return False
            seen.add(target)
            condition = op.get("ConditionExpression")
            if condition is None:
                continue
            current = backend.get_item(op["TableName"], key)
            holds = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            ).expr(current)
            if not holds:
                return False
    except Exception:  # anything odd: moto's own path says what is wrong
        return False
    return writes <= 1


class _TablesNotCopied:
    """``copy`` as moto's DynamoDB models see it while a safe transaction runs: a
    table's "backup" is the table itself; anything else is copied as before."""

    def __init__(self, table_type: type) -> None:
        self.table_type = table_type

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, self.table_type):
            return value
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


@contextlib.contextmanager
def _tables_not_copied() -> Iterator[None]:
    saved = getattr(models, "copy")  # noqa: B009 (moto's import, not an export)
    setattr(models, "copy", _TablesNotCopied(Table))  # noqa: B010
    try:
        yield
    finally:
        setattr(models, "copy", saved)  # noqa: B010


def install() -> None:
    """Patch moto's DynamoDB backend (once, in the moto server's process)."""
    global _INSTALLED  # noqa: PLW0603 (a process-wide patch, installed once)
    if _INSTALLED:
        return
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if needs_no_backup(self, transact_items):
            with _tables_not_copied():
                return original(self, transact_items)
        return original(self, transact_items)

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    _INSTALLED = True
