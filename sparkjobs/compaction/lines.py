"""A landed line in Spark: the header parsed as JSON, the payload sliced as written.

The envelope (:mod:`consumer.archive.envelope`) puts ``data`` last, so the payload is
the text between the first ``,"data":`` (:data:`~consumer.archive.envelope.DATA_MARKER`)
and the line's final ``}``. Spark's JSON reader would hand ``data`` over re-read: a JSON
string without its quotes (``"42"`` as ``42``), ``null`` as SQL NULL, and, where it
re-serialises, ``1E+2`` as ``100.0``. So lines are read as text and only the header
before the marker goes through ``from_json`` (or, for a line in exactly the lander's
form, the reader jar's header function); the payload is never parsed, on the clean
path and on lines recovered from truncated objects alike (:func:`parse`).

In ``raw`` payload format (``LANDER_PAYLOAD_FORMAT``) the payload is a JSON string of
base64, and ``data`` is that base64 without its quotes (base64 has nothing to escape).

The payload's pointers are read here too, as the analysis reads them: :func:`json_path`
and the event time's rule (:func:`event_time`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.types import BinaryType, StringType, StructType

from consumer.archive.envelope import DATA_MARKER
from sparkjobs.compaction.objectreader import HEADER as FAST
from sparkjobs.table.schema import CORRUPT, LANDED

HEADER = StructType([f for f in LANDED.fields if f.name != "data"])
"""The header fields (everything before ``data``) plus the corrupt-record column."""

SPACED = r'^(.*?),\s*"data"\s*:\s*(.*?)\s*\}\s*$'
"""The envelope with blanks around the marker or after the final brace: the header,
and the payload without the blanks around it."""

_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
_FAST = "_fast_header"


def parse(lines: DataFrame, payload_format: str, *, fast_header: bool = False) -> DataFrame:
    """``lines`` (a ``value`` column and others) with ``value`` replaced by the header
    fields, ``data`` and ``data_problem``.

    ``data_problem`` is null for a line whose payload slice is sound, else why not: no
    marker or no final ``}`` (``no data field at the end``), an empty payload, or, in
    raw format, a payload that is not a JSON string. A line without the marker is parsed
    whole, so text that is not JSON at all still reads as ``not a JSON object``.

    ``fast_header`` (the reader jar's :data:`~sparkjobs.compaction.objectreader.HEADER` is
    registered): a line in exactly the form the lander writes is split by that function
    instead, without a JSON parser; every other line as above. Both give the same
    columns for such a line (tests/sparkjobs/test_line_header.py).
    """
    value = sf.col("value")
    others = [c for c in lines.columns if c != "value"]
    # Bytes, not characters: Spark's string substring and length walk every character
    # of the line (a third of a warm run's CPU when they were used here); the header
    # ends at the first marker, found by a byte search, and the payload is a byte slice.
    head_text = sf.substring_index(value, DATA_MARKER, 1)
    head_bytes, line_bytes = sf.octet_length(head_text), sf.octet_length(value)
    exact = (head_bytes < line_bytes) & value.endswith("}")
    # Another writer may space its JSON (`, "data": …`): read by a regex, and only the
    # lines the exact marker misses pay for it (And short-circuits).
    spaced = ~exact & value.rlike(SPACED)
    start = head_bytes + len(DATA_MARKER) + 1
    payload = sf.when(exact, _bytes(value, start, line_bytes - start)).when(
        spaced, sf.regexp_extract(value, SPACED, 2)
    )
    head = sf.when(exact, sf.concat(head_text, sf.lit("}"))).when(
        spaced, sf.concat(sf.regexp_extract(value, SPACED, 1), sf.lit("}"))
    )
    found = exact | spaced
    header = sf.from_json(sf.coalesce(head, value), HEADER, _OPTIONS)
    if fast_header:
        # A step of its own, so the function runs once per line, however often it is used.
        lines = lines.select(
            *others, value, sf.call_function(FAST, value.cast(BinaryType())).alias(_FAST)
        )
        quick = sf.col(_FAST)
        known = quick.isNotNull()
        fields = [
            (sf.lit(None).cast(StringType()) if f.name == CORRUPT else quick[f.name]).alias(f.name)
            for f in HEADER.fields
        ]
        # CASE evaluates one branch: from_json only runs for the lines the function refused.
        header = sf.when(known, sf.struct(*fields)).otherwise(header)
        payload = sf.when(known, quick["payload"].cast(StringType())).otherwise(payload)
        # A CASE, not known | found: Spark hoists a subexpression used more than once
        # (the header's slice) out of both sides of an OR and computes it for every
        # line; only the other branches of a CASE are left for the lines that need them.
        found = sf.when(known, sf.lit(True)).otherwise(found)
    if payload_format == "raw":
        size = sf.octet_length(payload)
        quoted = payload.startswith('"') & payload.endswith('"') & (size >= 2)
        data = sf.when(quoted, _bytes(payload, sf.lit(2), size - 2))
        bad = sf.when(~quoted, sf.lit("raw data is not a JSON string"))
    else:
        data = payload
        bad = sf.when(sf.octet_length(payload) == 0, sf.lit("empty data"))
    problem = sf.when(~found, sf.lit("no data field at the end")).otherwise(bad)
    # Two steps, so the header is parsed once however many of its fields are used.
    split = lines.select(
        *others,
        header.alias("_header"),
        data.alias("data"),
        problem.alias("data_problem"),
    )
    return split.select(*others, "_header.*", "data", "data_problem")


def pointer_path(pointer: str) -> tuple[str, ...]:
    """A JSON pointer's field names (``/a/b~1c`` is ``("a", "b/c")``)."""
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/"))


def json_path(pointer: str) -> str:
    """A JSON pointer (``/a/b``) as the JSONPath ``get_json_object`` takes (``$['a']['b']``)."""
    steps = "".join(f"[{p}]" if p.isdigit() else f"['{p}']" for p in pointer_path(pointer))
    return "$" + steps


_FIRST_MICROS = -62_135_596_800_000_000
"""0001-01-01T00:00:00Z: an event time before it (or after :data:`_LAST_MICROS`) is no
event time (null), not a date Iceberg's day transform and Python cannot both show."""
_LAST_MICROS = 253_402_300_799_999_999
"""9999-12-31T23:59:59.999999Z."""
_EPOCH_BELOW = 1e21
"""An epoch number's magnitude below which its microseconds fit the product's decimal."""
_MS_ABOVE = 1e11
"""A bare number above this is epoch milliseconds (1e11 seconds is the year 5138)."""


def event_time(data: Column, pointer: str, notation: str | int | None = None) -> Column:
    """The payload's event time at ``pointer``: null when absent or unreadable. The
    compaction writes it as ``event_ts`` (:mod:`sparkjobs.compaction.eventtime`), the
    analysis reads it by the same rule.

    ``notation`` as a declared schema gives it: ``iso`` (ISO-8601 text only) or the units
    per second of an epoch number. Undeclared (None): ISO-8601 text, or an epoch number
    in seconds, or in milliseconds when above 1e11. Text without an offset is UTC.
    """
    raw = sf.get_json_object(data, json_path(pointer))
    iso = sf.try_to_timestamp(raw)
    if notation == "iso":
        return _bounded(iso)
    number = raw.try_cast("decimal(38,9)")
    if notation is None:
        per_second = sf.when(number > sf.lit(_MS_ABOVE), sf.lit(1000)).otherwise(sf.lit(1))
        value = sf.coalesce(iso, _epoch(number, per_second))
    else:
        value = _epoch(number, sf.lit(int(notation)))
    return _bounded(value)


def _epoch(number: Column, per_second: Column) -> Column:
    # Bounded before the product: under ANSI a decimal past its precision fails the
    # query instead of giving null (1e21 is past year 9999 in any unit up to 1e9 a second).
    fits = sf.abs(number) < sf.lit(_EPOCH_BELOW)
    micros = sf.when(fits, number * sf.lit(1_000_000) / per_second).try_cast("bigint")
    return sf.when(
        micros.between(sf.lit(_FIRST_MICROS), sf.lit(_LAST_MICROS)), sf.timestamp_micros(micros)
    )


def _bounded(value: Column) -> Column:
    micros = sf.unix_micros(value)
    return sf.when(micros.between(sf.lit(_FIRST_MICROS), sf.lit(_LAST_MICROS)), value)


def _bytes(text: Column, start: Column, length: Column) -> Column:
    """``length`` bytes of ``text`` from byte ``start`` (1-based), as a string."""
    return sf.substring(text.cast(BinaryType()), start, length).cast(StringType())
