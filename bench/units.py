"""What DynamoDB bills for an item as the wire carries it (``{"name": {"S": ...}}``):
its size, and the read and write request units of reading or writing it.

On-demand tables bill a read 1 unit per 4 KB strongly consistent (half that eventually
consistent), a write 1 unit per KB of the larger of the item before and after, at
least one unit each, whether the condition held or not. Transactions bill double: a
transactional write 2 units per KB of each item (a ConditionCheck billed as a write of
the item it checks), a transactional read 2 per 4 KB. :mod:`bench.billing` bills the
in-memory lease table with these units; :mod:`bench.scale_check` sizes the emulators'
items, :mod:`bench.effects_bill` the effects' requests.
"""

from __future__ import annotations

import json
import math
from typing import Any

READ_UNIT, WRITE_UNIT = 4096, 1024


def attribute_bytes(value: dict[str, Any]) -> int:
    """What DynamoDB counts for one attribute value: a string's UTF-8 bytes, a number
    about one byte per two digits plus one, one byte for a boolean, 3 bytes per list
    or map plus its elements (a map's names counted too)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = str(inner).lstrip("-").replace(".", "")
        return (len(digits) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(item).encode()) for item in inner)
    if kind == "L":
        return 3 + sum(attribute_bytes(item) + 1 for item in inner)
    if kind == "M":
        return 3 + sum(len(name) + attribute_bytes(item) + 1 for name, item in inner.items())
    return len(json.dumps(inner))


def dynamo_item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it, from its wire form: names and values."""
    return sum(len(name) + attribute_bytes(value) for name, value in item.items())


def read_units(size: int, *, strong: bool = True, transactional: bool = False) -> float:
    """Read request units of reading ``size`` bytes (at least one 4 KB unit, even for an
    item that is not there): 1 per 4 KB strongly consistent, half that eventually
    consistent, twice that in a transaction."""
    units = float(max(1, math.ceil(size / READ_UNIT)))
    if transactional:
        return 2 * units
    return units if strong else units / 2


def write_units(size: int, *, transactional: bool = False) -> float:
    """Write request units of writing (or, in a transaction, condition-checking) an item
    of ``size`` bytes, the larger of before and after: 1 per KB, 2 per KB in a
    transaction."""
    units = float(max(1, math.ceil(size / WRITE_UNIT)))
    return 2 * units if transactional else units
