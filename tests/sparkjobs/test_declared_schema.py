"""A payload schema declared as JSON Schema (sparkjobs.table.declared): each supported
form becomes its payload type, timestamps keep their notation, and anything else is
refused in one line naming the place."""

from __future__ import annotations

from decimal import Decimal as Exact
from typing import Any

import pytest

from sparkjobs.table.declared import DeclaredSchemaError, read_declared
from sparkjobs.table.payload import (
    BOOLEAN,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Decimal,
    Field,
    ListOf,
    Struct,
    fits,
)

ORDERS: dict[str, Any] = {
    "type": "object",
    "required": ["order_id", "amount", "placed_at", "note"],
    "properties": {
        "order_id": {"type": "integer"},
        "quantity": {"type": "integer", "format": "int32"},
        "amount": {"type": "string", "format": "decimal", "precision": 12, "scale": 2},
        "ratio": {"type": "number", "format": "float"},
        "score": {"type": "number"},
        "paid": {"type": "boolean"},
        "placed_at": {"type": "string", "format": "date-time"},
        "shipped_ms": {"type": ["integer", "null"], "format": "unix-time-ms"},
        "note": {"type": ["string", "null"]},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sku"],
                "properties": {
                    "sku": {"type": "string"},
                    "at": {"type": "number", "format": "unix-time"},
                },
            },
        },
    },
}


def test_each_form_becomes_its_type() -> None:
    declared = read_declared(ORDERS)
    line = Struct((Field("at", TIMESTAMP, False), Field("sku", STRING, True)))
    assert declared.type == Struct(
        (
            Field("amount", Decimal(12, 2), True),
            Field("lines", ListOf(line, True), False),
            Field("note", STRING, False),  # required, but it may be null
            Field("order_id", LONG, True),
            Field("paid", BOOLEAN, False),
            Field("placed_at", TIMESTAMP, True),
            Field("quantity", INT, False),
            Field("ratio", FLOAT, False),
            Field("score", DOUBLE, False),
            Field("shipped_ms", TIMESTAMP, False),
        )
    )
    assert declared.timestamps == {
        ("placed_at",): "iso",
        ("shipped_ms",): 1000,
        ("lines", "element", "at"): 1,
    }
    assert fits({"amount": Exact("19.99")}, declared.type)


def _x(node: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": node}}


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"type": "array", "items": {"type": "string"}}, "must be an object"),
    (_x({"oneOf": []}), "/x: oneOf is not supported"),
    (_x({"type": ["string", "integer"]}), "/x: give exactly one type"),
    (_x({}), r"/x: give exactly one type besides null \(found none\)"),
    (_x({"type": "array"}), "/x: an array needs items"),
    (_x({"type": "string", "format": "uuid"}), "/x: type string with format uuid is not"),
    (
        _x({"type": "number", "format": "decimal", "precision": 40}),
        r"/x: decimal\(40, 0\) is not one Iceberg holds",
    ),
    (_x({"type": "number", "format": "decimal"}), "/x: a decimal needs integer precision"),
    (_x({"type": "object", "properties": {"b": {"$ref": "#"}}}), r"/x/b: \$ref is not supported"),
]


@pytest.mark.parametrize(("schema", "message"), REFUSED)
def test_what_is_not_supported_is_refused_in_one_line(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(DeclaredSchemaError, match=message) as refused:
        read_declared(schema)
    assert "\n" not in str(refused.value)
