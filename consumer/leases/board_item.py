"""The workers table's items as DynamoDB attribute values (layout in :mod:`.dynamo_board`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from consumer.leases.board import Leadership, Slot

KEY = "itemKey"
"""The workers table's hash key."""
LEADER_KEY = "leader"
"""The leader item's key; a worker's slot is keyed ``worker/<worker id>``."""
SLOT_PREFIX = "worker/"


def slot_key(worker: str) -> Any:
    """The key of ``worker``'s slot."""
    return {KEY: {"S": SLOT_PREFIX + worker}}


def slot_item(
    worker: str, counter: int, joined: int, instance: str | None, address: str | None
) -> Any:
    """A fresh slot: no notices, nothing held or incoming, not leaving."""
    item: dict[str, Any] = {
        **slot_key(worker),
        "c": {"N": str(counter)},
        "j": {"N": str(joined)},
        "g": {"N": "0"},
        "n": {"N": "0"},
        "l": {"BOOL": False},
        "i": {"L": []},
    }
    if instance is not None:
        item["p"] = {"S": instance}
    if address is not None:
        item["a"] = {"S": address}
    return item


def worker_of(item: Mapping[str, Any]) -> str | None:
    """The worker id of a slot item; None for the leader item (or anything else)."""
    key = str(item[KEY]["S"])
    return key[len(SLOT_PREFIX) :] if key.startswith(SLOT_PREFIX) else None


def slot_from_item(raw: Mapping[str, Any]) -> Slot:
    """Read a slot item."""
    return Slot(
        counter=int(raw["c"]["N"]),
        joined=int(raw.get("j", {}).get("N", "0")),
        fenced=bool(raw.get("f", {}).get("BOOL", False)),
        notices=int(raw.get("g", {}).get("N", "0")),
        held=int(raw.get("n", {}).get("N", "0")),
        leaving=bool(raw.get("l", {}).get("BOOL", False)),
        unfit=bool(raw.get("x", {}).get("BOOL", False)),
        incoming=tuple(entry["S"] for entry in raw.get("i", {}).get("L", [])),
        cpu=float(raw.get("u", {}).get("N", "0")),
        beat_ms=int(raw["t"]["N"]) if "t" in raw else None,
        instance=raw["p"]["S"] if "p" in raw else None,
        address=raw["a"]["S"] if "a" in raw else None,
    )


def leadership_item(leadership: Leadership) -> Any:
    """The leader item."""
    item: dict[str, Any] = {
        KEY: {"S": LEADER_KEY},
        "w": {"S": leadership.leader},
        "c": {"N": str(leadership.counter)},
    }
    if leadership.deputy is not None:
        item["d"] = {"S": leadership.deputy}
    if leadership.address is not None:
        item["a"] = {"S": leadership.address}
    return item


def leadership_from_item(raw: Mapping[str, Any]) -> Leadership:
    """Read the leader item."""
    return Leadership(
        leader=raw["w"]["S"],
        counter=int(raw["c"]["N"]),
        deputy=raw["d"]["S"] if "d" in raw else None,
        address=raw["a"]["S"] if "a" in raw else None,
    )
