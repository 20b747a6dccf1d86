"""The compacted ``data`` is the landed payload text, byte for byte, for every JSON shape.

The archives here are written by this file's own few lines (string formatting and
gzip, after docs/landing.md), not by the lander's encoder, so the test holds the job to
the documented format rather than to whatever the writer happens to do. Each payload
lands twice: in a sound object, and in a truncated one whose complete lines the job
recovers (the recovery path must give the same bytes). The output is read with DuckDB
through the published pointers.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkjobs.analysis.analyse import AnalyseJob, analyse
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.table.compacted import current_files
from sparkjobs.window import Window
from tests.support.landed import STREAM, line, write_object

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WINDOW = Window.parse("2026-11-21T10")

SHAPES: list[bytes] = [
    b'{"id":1,"items":[1,2,3]}',
    b'{"a": 1, "b": [1, 2], "c": {"d": null}}',
    b"[1,2,3]",
    b"[]",
    b"{}",
    '{"name":"Zoë","city":"Zürich","emoji":"🦀"}'.encode(),
    b'{"escaped":"caf\\u00e9 \\"quoted\\" back\\\\slash"}',
    b'{"big":123456789012345678901234567890}',
    b"-98765432109876543210987654321",
    b'{"exact":0.1000000000000000055511151231257827}',
    b"0.1000000000000000055511151231257827",
    b"1E+2",
    b'{"e":1E+2,"f":1e-7,"g":-0.0}',
    b'"just a string"',
    b'"42"',
    b'"true"',
    b'""',
    b'"null"',
    b"42",
    b"-7",
    b"true",
    b"false",
    b"null",
    b'{"data":1,"x":",\\"data\\":"}',
]
"""Payload shapes producers send: objects compact and spaced, arrays, unicode raw and
escaped, integers beyond 64 bits, exact decimals, exponents, bare strings that look like
numbers or booleans, bare scalars, null, and a payload that itself holds the marker."""


def _archive(root: Path, payloads: list[bytes]) -> dict[str, bytes]:
    """Each payload in a sound object (shard 0) and in a truncated one (shard 1), the
    truncated object's last line cut; the expected ``data`` by event id."""
    expected: dict[str, bytes] = {}
    sound, damaged = [], []
    for i, payload in enumerate(payloads):
        arrival = f"2026-11-21T10:05:{i % 60:02d}.{i % 1000:03d}Z"
        sound.append(line("shardId-000000000000", 1000 + i, arrival, f"a{i}", payload))
        damaged.append(line("shardId-000000000001", 5000 + i, arrival, f"b{i}", payload))
        expected[f"a{i}"] = expected[f"b{i}"] = payload
    # A last line in the damaged object, which the cut loses: its trailer and more go.
    damaged.append(line("shardId-000000000001", 9999, "2026-11-21T10:05:59.999Z", "lost", b"1"))
    write_object(root, "2026-11-21T10:05", "shardId-000000000000", sound)
    write_object(root, "2026-11-21T10:05", "shardId-000000000001", damaged, cut=20)
    return expected


def _compacted_data(output: Path) -> dict[str, bytes]:
    files = [
        uri.removeprefix("file://")
        for uri in current_files(table_ref(f"file://{output}", STREAM), WINDOW)
    ]
    rows = duckdb.execute(f"select event_id, data from read_parquet({files})").fetchall()
    assert all(data is not None for _, data in rows), "a payload became SQL NULL"
    return {event_id: data.encode() for event_id, data in rows}


def test_every_shape_survives_clean_and_recovered(spark: SparkSession, tmp_path: Path) -> None:
    expected = _archive(tmp_path / "archive", SHAPES)
    manifest = compact(
        spark,
        CompactJob(f"file://{tmp_path / 'archive'}", STREAM, WINDOW, f"file://{tmp_path / 'out'}"),
    )
    assert [bad.kind for bad in manifest.bad_files] == ["truncated"]
    assert _compacted_data(tmp_path / "out") == expected


def test_analyse_counts_utf8_bytes_of_the_landed_text(spark: SparkSession, tmp_path: Path) -> None:
    payloads = ['{"w":"Zoë"}'.encode(), '"€"'.encode(), b"null", b'"x"']
    _compact_sound(spark, tmp_path, payloads)
    job = AnalyseJob(f"file://{tmp_path / 'out'}", STREAM, WINDOW, f"file://{tmp_path / 'rep'}")
    found = analyse(spark, job)
    assert found.bytes == sum(len(p) for p in payloads)  # 12 + 5 + 4 + 3, not characters


def _compact_sound(
    spark: SparkSession, tmp_path: Path, payloads: list[bytes], **options: Any
) -> None:
    lines = [
        line("shardId-000000000000", 1000 + i, f"2026-11-21T10:05:00.{i:03d}Z", f"a{i}", p)
        for i, p in enumerate(payloads)
    ]
    write_object(tmp_path / "archive", "2026-11-21T10:05", "shardId-000000000000", lines)
    job = CompactJob(
        f"file://{tmp_path / 'archive'}", STREAM, WINDOW, f"file://{tmp_path / 'out'}", **options
    )
    compact(spark, job)


def test_raw_format_publishes_the_base64_text(spark: SparkSession, tmp_path: Path) -> None:
    blobs = [b"\x00\xff binary", b"", "Zoë".encode()]
    payloads = [json.dumps(base64.b64encode(b).decode()).encode() for b in blobs]
    _compact_sound(spark, tmp_path, payloads, payload_format="raw")
    data = _compacted_data(tmp_path / "out")
    assert [base64.b64decode(data[f"a{i}"]) for i in range(len(blobs))] == blobs


def test_lines_whose_data_cannot_be_sliced_are_malformed(
    spark: SparkSession, tmp_path: Path
) -> None:
    good = line("shardId-000000000000", 1000, "2026-11-21T10:05:00.000Z", "a0", b"1")
    no_data = good.replace(b',"data":1}', b"}")
    empty = good.replace(b',"data":1}', b',"data":}')
    not_json = b'garbage,"data":1}\n'
    write_object(
        tmp_path / "archive",
        "2026-11-21T10:05",
        "shardId-000000000000",
        [good, not_json, no_data, empty],
    )
    job = CompactJob(f"file://{tmp_path / 'archive'}", STREAM, WINDOW, f"file://{tmp_path / 'out'}")
    manifest = compact(spark, job)
    assert _compacted_data(tmp_path / "out") == {"a0": b"1"}
    reasons = sorted(bad.detail for bad in manifest.bad_files if bad.kind == "malformed")
    assert reasons == ["empty data", "no data field at the end", "not a JSON object"]


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.lists(JSON_VALUES, min_size=1, max_size=40),
    spaced=st.booleans(),
    ascii_only=st.booleans(),
)
def test_any_json_value_round_trips_through_writer_spark_and_parquet(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    values: list[object],
    spaced: bool,
    ascii_only: bool,
) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    payloads = [
        json.dumps(v, separators=separators, ensure_ascii=ascii_only).encode(
            "utf-8", "surrogatepass"
        )
        for v in values
    ]
    # A lone surrogate has no UTF-8 form; the lander dead-letters such a payload.
    payloads = [p for p in payloads if _is_utf8(p)] or [b"null"]
    root = tmp_path_factory.mktemp("roundtrip")
    expected = _archive(root / "archive", payloads)
    compact(
        spark,
        CompactJob(f"file://{root / 'archive'}", STREAM, WINDOW, f"file://{root / 'out'}"),
    )
    assert _compacted_data(root / "out") == expected


def _is_utf8(payload: bytes) -> bool:
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
