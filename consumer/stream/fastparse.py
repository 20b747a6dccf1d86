"""JSON-protocol responses parsed to the values botocore's parser returns, faster.

A GetRecords response of 10,000 plain records cost about 10 us a record to parse
through botocore (bench hotpath, "from the response"): the standard library's
``json.loads`` of the body, then a walk of the output shape that makes five handler
calls per record, each found by name. That was more than twice the CPU the lander
then spends on the record (unpack, envelope, gzip). KPL aggregates pay it once per
aggregate, plain records once per record.

:class:`FastJSONParsing` changes one step: a list of flat structures (every member a
string, number, boolean, blob or timestamp, as Kinesis' ``Record``) is walked with a
plan made once per shape: the members' wire names and the converters botocore's
handlers would call. Any other list, and any element that is not a JSON object, takes
botocore's path. The body is still read by botocore, with ``json.loads``: orjson reads
it about 20 % faster, but turns an integer past 64 bits into a float where
``json.loads`` keeps it exact (the property test found it).

tests/stream/test_fastparse.py holds the parser equal to aiobotocore's on random bodies
and records; every test that runs a worker on an emulator reads through it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, Final

from botocore.parsers import BaseJSONParser, ResponseParser

Convert = Callable[[Any], Any] | None
"""What a member's raw value goes through: None keeps it as it is."""
Plan = tuple[tuple[str, str, Convert], ...]
"""(member name, name on the wire, converter), in the shape's member order."""

_PLANS_KEPT: Final = 256
"""Shapes whose plan a parser keeps (a service model has a few dozen list shapes)."""


# botocore's handlers, to recognise them on a parser (the stubs do not type internals).
_DEFAULT_HANDLE: Final[Any] = vars(ResponseParser)["_default_handle"]
_DEFAULT_BLOB_PARSER: Final[Any] = vars(ResponseParser)["_default_blob_parser"]
_HANDLE_BLOB: Final[Any] = vars(BaseJSONParser)["_handle_blob"]
_HANDLE_TIMESTAMP: Final[Any] = vars(BaseJSONParser)["_handle_timestamp"]


def b64decode(value: Any) -> bytes:
    """``base64.b64decode`` (botocore's blob parser), without its Python wrapper for the
    common case: an ASCII string, which it hands to ``binascii`` as it is."""
    if type(value) is str and value.isascii():
        return binascii.a2b_base64(value)
    return base64.b64decode(value)


class FastJSONParsing:
    """Mixin for botocore's JSON-protocol parsers: put it before the parser class."""

    _blob_parser: Callable[[Any], Any]
    _timestamp_parser: Callable[[Any], Any]

    def _handle_list(self, shape: Any, node: Any) -> Any:
        member = shape.member
        plan = self._plan(member) if type(node) is list else None
        if plan is None:
            return super()._handle_list(shape, node)  # type: ignore[misc]
        parsed: list[Any] = []
        append = parsed.append
        for item in node:
            if type(item) is dict:
                out = {}
                for name, wire_name, convert in plan:
                    raw = item.get(wire_name)
                    if raw is not None:
                        out[name] = raw if convert is None else convert(raw)
                append(out)
            elif item is None:
                append(None)  # botocore reads every list as sparse
            else:
                append(self._parse_shape(member, item))  # type: ignore[attr-defined]
        return parsed

    def _plan(self, shape: Any) -> Plan | None:
        plans: dict[Any, Plan | None] = self.__dict__.setdefault("_flat_plans", {})
        if shape in plans:
            return plans[shape]
        plan = self._make_plan(shape)
        if len(plans) < _PLANS_KEPT:
            plans[shape] = plan  # the shape itself is the key: kept alive, never reused
        return plan

    def _make_plan(self, shape: Any) -> Plan | None:
        """The plan for a flat structure, or None where botocore's walk must run."""
        if (
            shape.type_name != "structure"
            or shape.is_document_type
            or getattr(shape, "is_tagged_union", False)
        ):
            return None
        steps: list[tuple[str, str, Convert]] = []
        for name, member in shape.members.items():
            flat, convert = self._converter(member)
            if not flat:
                return None
            steps.append((name, member.serialization.get("name", name), convert))
        return tuple(steps)

    def _converter(self, member: Any) -> tuple[bool, Convert]:
        """What botocore's handler for ``member`` does to a value: (False, None) for
        anything but an identity, the blob parser or the timestamp parser."""
        handler = getattr(self, f"_handle_{member.type_name}", None)
        if handler is None:  # botocore then calls the parser's default handler
            handler = getattr(self, "_default_handle", None)
        function = getattr(handler, "__func__", None)
        if function is _DEFAULT_HANDLE:
            return True, None
        if function is _HANDLE_BLOB:
            blob = self._blob_parser
            if getattr(blob, "__func__", None) is _DEFAULT_BLOB_PARSER:
                return True, b64decode
            return True, blob
        if function is _HANDLE_TIMESTAMP:
            return True, self._timestamp_parser
        return False, None
