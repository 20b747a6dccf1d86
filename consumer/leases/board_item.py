"""The board item's DynamoDB attribute values (layout in :mod:`.dynamo_board`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from consumer.leases.board import Board, Slot


def slot_item(counter: int, joined: int, instance: str | None, address: str | None) -> Any:
    """A fresh slot's map: no notices, nothing held or incoming, not leaving."""
    slot: dict[str, Any] = {
        "c": {"N": str(counter)},
        "j": {"N": str(joined)},
        "g": {"N": "0"},
        "n": {"N": "0"},
        "l": {"BOOL": False},
        "i": {"L": []},
    }
    if instance is not None:
        slot["p"] = {"S": instance}
    if address is not None:
        slot["a"] = {"S": address}
    return slot


def board_from_item(item: Mapping[str, Any]) -> Board:
    """Read the board item."""
    slots = {
        worker: _slot(value["M"]) for worker, value in item.get("slots", {}).get("M", {}).items()
    }
    return Board(slots=slots, joins=int(item.get("joins", {}).get("N", "0")))


def _slot(raw: Mapping[str, Any]) -> Slot:
    return Slot(
        counter=int(raw["c"]["N"]),
        joined=int(raw.get("j", {}).get("N", "0")),
        fenced=bool(raw.get("f", {}).get("BOOL", False)),
        notices=int(raw.get("g", {}).get("N", "0")),
        held=int(raw.get("n", {}).get("N", "0")),
        leaving=bool(raw.get("l", {}).get("BOOL", False)),
        incoming=tuple(entry["S"] for entry in raw.get("i", {}).get("L", [])),
        cpu=float(raw.get("u", {}).get("N", "0")),
        beat_ms=int(raw["t"]["N"]) if "t" in raw else None,
        instance=raw["p"]["S"] if "p" in raw else None,
        address=raw["a"]["S"] if "a" in raw else None,
    )
