"""A payload schema declared by the user (issue 48): a JSON Schema, read into payload
types (:mod:`sparkjobs.table.payload`).

Inference cannot know what the producers mean: that a string is a timestamp, that a
number is money and must stay exact, that an integer may grow past 32 bits. A declared
schema says so, for the fields it names (the others are inferred). The subset of JSON
Schema read here is the one producers' schemas use for records:

- ``{"type": "object", "properties": {...}, "required": [...]}``: a struct; a field is
  required when ``required`` names it and its type does not allow ``null``;
- ``{"type": "array", "items": {...}}``: a list;
- ``"integer"``: ``long`` (``"format": "int32"``: ``int``);
- ``"number"``: ``double`` (``"format": "float"``: ``float``; ``"format": "decimal"`` with
  ``"precision"`` and ``"scale"``: an exact ``decimal(p, s)``);
- ``"string"``: ``string``; ``"format": "date-time"``: a timestamp from an ISO-8601
  string;
- ``"integer"`` or ``"number"`` with ``"format": "unix-time"`` (seconds) or
  ``"unix-time-ms"`` (milliseconds): a timestamp from an epoch number;
- ``"boolean"``; ``"type": [T, "null"]`` or ``"nullable": true``: T, never required.

Anything else (``oneOf``, ``$ref``, a type list of two non-null types, an unknown
format) is refused with one line naming the place, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from consumer.config import ConfigError
from sparkjobs.settings import CompactSettings
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
    Type,
)

EPOCH_FORMATS = {"unix-time": 1, "unix-time-ms": 1000}
"""Epoch notations of a timestamp: units per second."""
MAX_PRECISION = 38


class DeclaredSchemaError(ConfigError, ValueError):
    """The declared schema uses what this reader does not take (one line): a setting's
    problem (exit 2)."""

    retriable = False


@dataclass
class Declared:
    """The declared payload type, and how each timestamp is written in the records
    (``iso``, or units per second of an epoch number), by path."""

    type: Struct
    timestamps: dict[tuple[str, ...], str | int] = field(default_factory=dict)


def read_declared(schema: Mapping[str, Any]) -> Declared:
    """The payload type a JSON Schema of the records declares; DeclaredSchemaError."""
    timestamps: dict[tuple[str, ...], str | int] = {}
    found, _ = _node(schema, (), timestamps)
    if not isinstance(found, Struct):
        raise DeclaredSchemaError("the declared payload schema must be an object (type: object)")
    return Declared(found, timestamps)


def declared_setting(document: Mapping[str, Any] | None, setting: str) -> Declared | None:
    """The declared schema of a stream's ``LANDER_PAYLOAD_SCHEMA`` (``setting``, the
    file's path; ``document``, the file as read: None when the setting is not a file);
    DeclaredSchemaError, a ConfigError (exit 2), names the file and the place."""
    if document is None:
        return None
    try:
        return read_declared(document)
    except DeclaredSchemaError as exc:
        raise DeclaredSchemaError(f"LANDER_PAYLOAD_SCHEMA {setting}: {exc}") from None


def declared_problem(settings: object) -> str | None:
    """The first problem of a ``lander compact``'s streams' declared schemas, as the one
    line it prints before Spark starts (exit 2); None when all read (or another job)."""
    if not isinstance(settings, CompactSettings):
        return None
    for stream in settings.streams:
        own = settings.for_stream(stream)
        try:
            declared_setting(own.declared_document, own.payload_schema)
        except DeclaredSchemaError as exc:
            return str(exc)
    return None


def _where(path: tuple[str, ...]) -> str:
    return "/" + "/".join(path) if path else "the schema's root"


def _node(
    node: Any, path: tuple[str, ...], timestamps: dict[tuple[str, ...], str | int]
) -> tuple[Type, bool]:
    """The type at ``path``, and whether it allows null."""
    if not isinstance(node, Mapping):
        raise DeclaredSchemaError(f"{_where(path)}: a schema must be an object")
    for word in ("oneOf", "anyOf", "allOf", "$ref", "not"):
        if word in node:
            raise DeclaredSchemaError(f"{_where(path)}: {word} is not supported; give one type")
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    nullable = bool(node.get("nullable", False)) or "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    if len(kinds) != 1:
        raise DeclaredSchemaError(
            f"{_where(path)}: give exactly one type besides null (found {kinds or 'none'})"
        )
    kind, form = kinds[0], node.get("format")
    if kind == "object":
        return _object(node, path, timestamps), nullable
    if kind == "array":
        items = node.get("items")
        if items is None:
            raise DeclaredSchemaError(f"{_where(path)}: an array needs items")
        element, element_nullable = _node(items, (*path, "element"), timestamps)
        return ListOf(element, not element_nullable), nullable
    if form in EPOCH_FORMATS and kind in ("integer", "number"):
        timestamps[path] = EPOCH_FORMATS[form]
        return TIMESTAMP, nullable
    if kind == "string" and form == "date-time":
        timestamps[path] = "iso"
        return TIMESTAMP, nullable
    return _scalar(node, kind, form, path), nullable


def _object(
    node: Mapping[str, Any], path: tuple[str, ...], timestamps: dict[tuple[str, ...], str | int]
) -> Struct:
    properties = node.get("properties", {})
    required = set(node.get("required", []))
    if not isinstance(properties, Mapping):
        raise DeclaredSchemaError(f"{_where(path)}: properties must be an object")
    fields = []
    for name, child in properties.items():
        child_type, child_nullable = _node(child, (*path, str(name)), timestamps)
        fields.append(Field(str(name), child_type, name in required and not child_nullable))
    return Struct(tuple(sorted(fields, key=lambda f: f.name)))


def _scalar(node: Mapping[str, Any], kind: str, form: Any, path: tuple[str, ...]) -> Type:
    simple: dict[tuple[str, Any], Type] = {
        ("integer", None): LONG,
        ("integer", "int64"): LONG,
        ("integer", "int32"): INT,
        ("number", None): DOUBLE,
        ("number", "double"): DOUBLE,
        ("number", "float"): FLOAT,
        ("string", None): STRING,
        ("boolean", None): BOOLEAN,
    }
    if (kind, form) in simple:
        return simple[(kind, form)]
    if kind in ("number", "integer", "string") and form == "decimal":
        precision, scale = node.get("precision"), node.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int):
            raise DeclaredSchemaError(
                f"{_where(path)}: a decimal needs integer precision and scale"
            )
        if not 0 < precision <= MAX_PRECISION or not 0 <= scale <= precision:
            raise DeclaredSchemaError(
                f"{_where(path)}: decimal({precision}, {scale}) is not one Iceberg holds "
                f"(precision 1 to {MAX_PRECISION}, scale 0 to the precision)"
            )
        return Decimal(precision, scale)
    what = f"{kind} with format {form}" if form is not None else kind
    raise DeclaredSchemaError(f"{_where(path)}: type {what} is not supported")
