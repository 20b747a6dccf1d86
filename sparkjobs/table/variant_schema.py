"""What Spark says a window's payloads are, as payload types (issue 48): pure.

Spark parses each payload once (``parse_json``, strict JSON) and
``schema_of_variant_agg`` joins the shapes of every object payload into one text such
as ``OBJECT<a: BIGINT, `b c`: ARRAY<DECIMAL(21,1)>, d: VARIANT>`` (names quoted with
backticks when they are not plain words, a backtick doubled). :func:`read_variant_schema`
reads that text into :mod:`sparkjobs.table.payload`'s types, deciding as inference
does there:

- ``BIGINT`` (any integer that fits 64 bits) is ``long``: Spark does not tell a small
  integer from a large one, and a ``long`` column holds both (``int`` needs a declared
  ``int32``);
- ``DECIMAL(p, 0)`` is an integer beyond 64 bits: ``decimal(38, 0)`` (beyond 38 digits
  Spark holds the number as ``DOUBLE``, and so does the column);
- ``DECIMAL(p, s)`` with a fraction and ``DOUBLE`` are ``double`` (an exact decimal is
  declared, never guessed);
- ``OBJECT<...>`` is a struct whose fields are all optional (the text does not say
  whether every object had a field), ``ARRAY<T>`` a list of optional elements;
- ``VOID`` (only nulls) is null, ``VARIANT`` (a mix) is variant; any other type cannot
  come from JSON and is variant too.
"""

from __future__ import annotations

import re

from sparkjobs.table.payload import (
    BIG_INTEGER,
    BOOLEAN,
    DOUBLE,
    LONG,
    NULL,
    STRING,
    VARIANT,
    Field,
    ListOf,
    Struct,
    Type,
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_SIMPLE = {"BIGINT": LONG, "DOUBLE": DOUBLE, "STRING": STRING, "BOOLEAN": BOOLEAN}


def read_variant_schema(text: str) -> Type:
    """The payload type ``schema_of_variant(_agg)``'s ``text`` describes (ValueError for
    text Spark does not write: a bug, never bad input)."""
    parsed, at = _type(text, 0)
    if at != len(text):
        raise ValueError(f"unexpected {text[at:]!r} at {at} in {text!r}")
    return parsed


def _type(text: str, at: int) -> tuple[Type, int]:
    if text.startswith("OBJECT<", at):
        return _object(text, at + len("OBJECT<"))
    if text.startswith("ARRAY<", at):
        element, at = _type(text, at + len("ARRAY<"))
        return ListOf(element, element_required=False), _expect(text, at, ">")
    decimal = _DECIMAL.match(text, at)
    if decimal:
        scale = int(decimal.group(2))
        return (BIG_INTEGER if scale == 0 else DOUBLE), decimal.end()
    word = re.compile(r"[A-Z]+").match(text, at)
    if word is None:
        raise ValueError(f"no type at {at} in {text!r}")
    name = word.group(0)
    if name == "VOID":
        return NULL, word.end()
    return _SIMPLE.get(name, VARIANT), word.end()


def _object(text: str, at: int) -> tuple[Struct, int]:
    fields: list[Field] = []
    if text.startswith(">", at):
        return Struct(()), at + 1
    while True:
        name, at = _name(text, at)
        at = _expect(text, at, ": ")
        kind, at = _type(text, at)
        fields.append(Field(name, kind, required=False))
        if text.startswith(", ", at):
            at += 2
            continue
        at = _expect(text, at, ">")
        return Struct(tuple(sorted(fields, key=lambda f: f.name))), at


def _name(text: str, at: int) -> tuple[str, int]:
    if text.startswith("`", at):
        out: list[str] = []
        at += 1
        while True:
            end = text.find("`", at)
            if end < 0:
                raise ValueError(f"unclosed name at {at} in {text!r}")
            out.append(text[at:end])
            if text.startswith("``", end):  # a doubled backtick is one in the name
                out.append("`")
                at = end + 2
                continue
            return "".join(out), end + 1
    word = _WORD.match(text, at)
    if word is None:
        raise ValueError(f"no field name at {at} in {text!r}")
    return word.group(0), word.end()


def _expect(text: str, at: int, token: str) -> int:
    if not text.startswith(token, at):
        raise ValueError(f"expected {token!r} at {at} in {text!r}")
    return at + len(token)


def write_variant_schema(kind: Type) -> str:
    """``kind`` as ``schema_of_variant`` would write it (what :func:`read_variant_schema`
    reads back as ``kind``)."""
    if isinstance(kind, Struct):
        inner = ", ".join(f"{_quoted(f.name)}: {write_variant_schema(f.type)}" for f in kind.fields)
        return f"OBJECT<{inner}>"
    if isinstance(kind, ListOf):
        return f"ARRAY<{write_variant_schema(kind.element)}>"
    if kind == BIG_INTEGER:
        return "DECIMAL(38,0)"
    names = {v: k for k, v in _SIMPLE.items()}
    if kind in names:
        return names[kind]
    return "VOID" if kind == NULL else "VARIANT"


def _quoted(name: str) -> str:
    if _WORD.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"
