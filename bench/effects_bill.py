"""What a worker's DynamoDB client would be billed for, counted on the client itself.

:class:`DynamoBill` attaches to an aiobotocore (or botocore) DynamoDB client through
botocore's event hooks, as :class:`bench.aws_requests.RequestCounter` does:
``provide-client-params`` once per API call (the parameters name the table, the
operation, a transaction's items and a Put's item), ``after-call`` with the parsed
response (the items a read returned, whose size its read units follow). Each call is
labelled by the role of its table (``effects``, ``lease``, ``workers``) and its
operation, each item of a TransactWriteItems apart, and billed by DynamoDB's rules
(:func:`bench.billing.read_units`, :func:`bench.billing.write_units`):

* a read by the size of what it returned (GetItem strongly consistent: 1 unit per 4 KB,
  at least 1 even for an item that is not there);
* a transaction's Put by the larger of the item it writes (from the request) and the
  item it replaces (the last Put of the same key this bill saw), 2 units per KB;
* a transaction's ConditionCheck, and any write whose item is not in the request
  (UpdateItem, DeleteItem, a plain PutItem of the lease tables), by the size of the
  largest item of its table, read once the run is over (:meth:`DynamoBill.settle`).

Each label has a kind: ``record`` (the effects table's GetItem and TransactWriteItems
with its items, the lease table's checkpoints: what grows with the records),
``one-off`` (creating and describing tables) and ``coordination`` (beats, the leader
item, sweeps: what grows with time, not records).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.aws_requests import classify
from bench.units import dynamo_item_bytes, read_units, write_units

ONE_OFF = frozenset(
    {"CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive", "UpdateTable"}
)
READS = frozenset({"GetItem", "Scan", "Query"})
_CONTEXT = "bench_effects_bill"


@dataclass
class Line:
    """One label's calls (or a transaction's items) and what they cost."""

    kind: str
    count: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    seconds: float = 0.0
    """Time from the call to its parsed response, summed (calls only, not items)."""

    def as_dict(self) -> dict[str, Any]:
        """For the results file."""
        return {
            "kind": self.kind,
            "count": self.count,
            "read_units": self.read_units,
            "write_units": self.write_units,
            "mean_ms": self.seconds / self.count * 1e3 if self.count and self.seconds else None,
        }


@dataclass
class DynamoBill:
    """Calls of the clients attached, by phase and label, with their units."""

    roles: dict[str, str]
    """Table name -> its role in labels (``effects``, ``lease``, ``workers``)."""
    phase: str = "startup"
    lines: dict[tuple[str, str], Line] = field(default_factory=dict)
    unsized: Counter[tuple[str, str, str, bool]] = field(default_factory=Counter)
    """(phase, label, table, transactional) -> writes billed by the table's largest item."""
    _put_sizes: dict[tuple[str, str], int] = field(default_factory=dict)

    def attach(self, client: Any) -> None:
        """Count this client's calls."""
        events = client.meta.events
        events.register("provide-client-params.dynamodb", self._on_call)
        events.register("after-call.dynamodb", self._on_response)

    def role(self, table: str) -> str:
        """The role of ``table`` in labels."""
        return self.roles.get(table, "other")

    def line(self, label: str, kind: str, phase: str | None = None) -> Line:
        """The line of ``label`` in ``phase`` (the current one by default)."""
        key = (phase or self.phase, label)
        if key not in self.lines:
            self.lines[key] = Line(kind)
        return self.lines[key]

    def _on_call(self, **kwargs: Any) -> None:
        operation = kwargs["model"].name
        params: dict[str, Any] = kwargs.get("params", {})
        context: dict[str, Any] = kwargs.get("context", {})
        if operation == "TransactWriteItems":
            label, kind = operation, "record"
            self._transaction(params)
        else:
            label, kind = self.label(operation, params)
        line = self.line(label, kind)
        line.count += 1
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            table = str(params.get("TableName", ""))
            self.unsized[(self.phase, label, table, False)] += 1
        context[_CONTEXT] = (self.phase, label, operation, params, time.perf_counter())
        # None: a value returned here would replace the call's parameters.

    def label(self, operation: str, params: dict[str, Any]) -> tuple[str, str]:
        """A call's label and kind (TransactWriteItems aside: its items are labelled)."""
        role = self.role(str(params.get("TableName", "")))
        if operation in ONE_OFF:
            return f"{role} {operation}", "one-off"
        if operation in READS:
            strong = "strong" if params.get("ConsistentRead") else "eventual"
            kind = "record" if role == "effects" else "coordination"
            return f"{role} {operation} ({strong})", kind
        name = classify("dynamodb", operation, params).removeprefix("dynamodb ")
        if role in {"workers", "other"}:
            name = operation
        kind = "record" if role == "effects" or name.endswith("(checkpoint)") else "coordination"
        return f"{role} {name}", kind

    def _transaction(self, params: dict[str, Any]) -> None:
        for item in params.get("TransactItems", []):
            ((action, body),) = item.items()
            table = str(body.get("TableName", ""))
            label = f"TransactWriteItems item: {action} on {self.role(table)}"
            line = self.line(label, "record")
            line.count += 1
            if action == "Put":
                key = (table, _key_of(body["Item"]))
                size = dynamo_item_bytes(body["Item"])
                before = self._put_sizes.get(key, 0)
                self._put_sizes[key] = size
                line.write_units += write_units(max(size, before), transactional=True)
            else:  # ConditionCheck, Update, Delete: the stored item's size
                self.unsized[(self.phase, label, table, True)] += 1

    def _on_response(self, **kwargs: Any) -> None:
        context: dict[str, Any] = kwargs.get("context", {})
        found = context.pop(_CONTEXT, None)
        if found is None:
            return
        phase, label, operation, params, began = found
        line = self.line(label, "", phase)
        line.seconds += time.perf_counter() - began
        parsed: dict[str, Any] = kwargs.get("parsed") or {}
        if operation not in READS or "Error" in parsed:
            return
        items = [parsed["Item"]] if "Item" in parsed else list(parsed.get("Items", []))
        size = sum(dynamo_item_bytes(dict(item)) for item in items)
        line.read_units += read_units(size, strong=bool(params.get("ConsistentRead")))

    def settle(self, largest: dict[str, int]) -> None:
        """Bill the writes sized by their table's largest item (``largest``: table ->
        bytes, read after the run)."""
        for (phase, label, table, transactional), n in self.unsized.items():
            units = write_units(largest.get(table, 0), transactional=transactional)
            self.line(label, "", phase).write_units += n * units
        self.unsized.clear()

    def phase_lines(self, phase: str) -> dict[str, Line]:
        """The lines of one phase, by label."""
        return {label: line for (p, label), line in sorted(self.lines.items()) if p == phase}


KEYS = ("effectKey", "leaseKey", "itemKey")
"""The hash keys of the effects, lease and workers tables."""


def _key_of(item: dict[str, Any]) -> str:
    """A name for an item's key: its hash key's value."""
    return next((f"{name}={item[name]}" for name in KEYS if name in item), repr(item))


def totals(lines: dict[str, dict[str, Any]], kind: str = "record") -> dict[str, float]:
    """API calls (transaction items not counted again) and units of one kind."""
    chosen = [line for label, line in lines.items() if line["kind"] == kind]
    calls = [line for label, line in lines.items() if line["kind"] == kind and "item:" not in label]
    return {
        "requests": float(sum(line["count"] for line in calls)),
        "read_units": sum(line["read_units"] for line in chosen),
        "write_units": sum(line["write_units"] for line in chosen),
    }


def merge(lines: list[dict[str, Line]]) -> dict[str, Line]:
    """Several runs' lines added up, by label."""
    out: dict[str, Line] = defaultdict(lambda: Line(""))
    for one in lines:
        for label, line in one.items():
            total = out[label]
            total.kind = total.kind or line.kind
            total.count += line.count
            total.read_units += line.read_units
            total.write_units += line.write_units
            total.seconds += line.seconds
    return dict(out)
