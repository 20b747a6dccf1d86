"""Typed payload columns (issue 48): an archive whose producers drift through a day,
written here line by line (not by the lander's writer), compacted hour by hour.

Every typed value is checked against the same field of ``data`` extracted by DuckDB
and judged by :func:`sparkjobs.table.payload.fits` (the pure rule): a value that fits
its column is the column's value, one that does not is null there and in ``rescued``,
counted per place in the run's manifest. The table's schema history has one version
per real change and none on a re-run; the table is read with pyiceberg (by the name
mapping: typed files carry no field ids).
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal as Exact
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow.parquet as pq
import pytest

from sparkjobs.analysis.analyse import AnalyseJob, analyse
from sparkjobs.analysis.findings import RescuedStat
from sparkjobs.analysis.report import render_text
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactionError, CompactJob, compact
from sparkjobs.compaction.payload_plan import sample_keys
from sparkjobs.table.declared import read_declared
from sparkjobs.table.payload import (
    BIG_INTEGER,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    Decimal,
    ListOf,
    Struct,
    Type,
    fits,
)
from sparkjobs.table.table import open_table, payload_schema
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# ~50 s of Spark: the deep tier; the decisions are tested pure (test_payload_plan.py).
pytestmark = [pytest.mark.spark, pytest.mark.deep]

STREAM = "orders"
DAY = datetime(2026, 11, 21, tzinfo=UTC)
SHARD = "shardId-000000000000"


def _record(hour: int, i: int) -> dict[str, Any]:
    """Record ``i`` of ``hour``: the producers drift as the day goes on."""
    doc: dict[str, Any] = {
        "id": hour * 1000 + i,
        "user": {"name": f"u{i}", "age": 20 + i},
        "amount": 12.5 + i,
        "tags": ["a", "b"][: i % 3],
        "ts": f"2026-11-21T{hour:02d}:{i:02d}:01Z",
    }
    if hour >= 1:
        doc["coupon"] = f"C{i}" if i % 2 else None  # a field added mid-day, nulls
        doc["items"] = [{"sku": "s1", "qty": i}, {"sku": "s2", "qty": None}]
    if hour >= 2:
        doc["big"] = 2**70 + i  # past 64 bits
        if i % 4 == 0:
            doc["user"]["age"] = "thirty"  # a string where a number was
        if hour == 2 and i == 5:
            doc["items"] = [{"sku": 7, "qty": 1}]  # an element that does not fit
        if hour == 2 and i == 7:
            doc["tags"] = ["a", 3]  # a number among strings
    if hour >= 3:
        doc["price"] = "19.99" if i % 2 else 19.5  # an exact decimal, declared
        doc["sent_ms"] = 1763683200000 + i  # epoch milliseconds, declared
        if i % 7 == 3:
            doc["sent_ms"] = "soon"
        if i == 11:
            doc["price"] = 1.234  # more digits than the column's scale
        if i % 5 == 0:
            doc["items"] = [{"sku": 7, "qty": 1}]  # an element that does not fit
    return doc


def _write_hour(archive: Path, hour: int, count: int = 12) -> None:
    """One object per hour, in the lander's layout and line format, written by hand."""
    start = DAY + timedelta(hours=hour, minutes=5)
    folder = (
        archive
        / f"stream={STREAM}/dt={start:%Y-%m-%d}/hour={start:%H}/minute={start:%M}/shard={SHARD}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    first = hour * 1000 + 1
    lines = []
    for i in range(count):
        arrival = (start + timedelta(seconds=i)).isoformat(timespec="milliseconds")
        head = {
            "stream": STREAM,
            "shard_id": SHARD,
            "sequence_number": str(first + i),
            "subsequence_number": 0,
            "partition_key": f"k{i}",
            "arrival_ts": arrival.replace("+00:00", "Z"),
        }
        data = json.dumps(_record(hour, i), separators=(",", ":"))
        lines.append(json.dumps(head, separators=(",", ":"))[:-1] + ',"data":' + data + "}\n")
    name = f"{first}-{first + count - 1}.jsonl.gz"
    (folder / name).write_bytes(gzip.compress("".join(lines).encode()))


def _job(archive: Path, output: Path, hour: int, **options: Any) -> CompactJob:
    window = Window.parse(f"2026-11-21T{hour:02d}")
    options = {"payload_schema": "infer", **options}
    return CompactJob(f"file://{archive}", STREAM, window, f"file://{output}", **options)


def _rows(output: Path) -> list[dict[str, Any]]:
    table = open_table(table_ref(f"file://{output}", STREAM), create=False)
    assert table is not None
    rows: list[dict[str, Any]] = table.scan().to_arrow().to_pylist()
    return rows


def _type_at(schema: Struct, *path: str) -> Type | None:
    """The column type at ``path`` (None: no column)."""
    kind: Type = schema
    for name in path:
        found = kind.field(name) if isinstance(kind, Struct) else None
        if found is None:
            return None
        kind = found.type
    return kind


def _leaves(kind: Type, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Type]]:
    if isinstance(kind, Struct):
        return [leaf for f in kind.fields for leaf in _leaves(f.type, (*path, f.name))]
    return [(path, kind)]


def _extracted(rows: list[dict[str, Any]], paths: list[tuple[str, ...]]) -> list[list[Any]]:
    """Each row's value at each path as DuckDB extracts it from ``data`` (JSON text, or
    None when the field is missing), read with Python's json."""
    con = duckdb.connect()
    con.execute("create table t (n integer, data varchar)")
    con.executemany("insert into t values (?, ?)", [(n, r["data"]) for n, r in enumerate(rows)])
    picks = ", ".join(
        "json_extract(data, '$" + "".join(f'."{p}"' for p in path) + "')::varchar" for path in paths
    )
    found = con.execute(f"select {picks} from t order by n").fetchall()
    return [[None if v is None else json.loads(v, parse_float=Exact) for v in row] for row in found]


def _column_value(value: Any, kind: Type, notation: str | int | None) -> Any:
    """What the typed column holds for a JSON value that fits ``kind``."""
    if kind == TIMESTAMP:
        if notation == "iso":
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        return datetime.fromtimestamp(0, UTC) + timedelta(microseconds=int(value) * 1000)
    if isinstance(kind, Decimal):
        return Exact(str(value)).quantize(Exact(1).scaleb(-kind.scale))
    if isinstance(kind, ListOf):
        return [_column_value(v, kind.element, None) if v is not None else None for v in value]
    if isinstance(kind, Struct):
        return {
            f.name: _column_value(value.get(f.name), f.type, None)
            if value.get(f.name) is not None
            else None
            for f in kind.fields
        }
    return float(value) if isinstance(value, Exact) else value


def _fits(value: Any, kind: Type, notation: str | int | None) -> bool:
    if kind == TIMESTAMP:
        if notation == "iso":
            return isinstance(value, str)
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(kind, Decimal) and isinstance(value, str):
        try:
            return fits(Exact(value), kind)
        except ArithmeticError:
            return False
    if isinstance(kind, ListOf) and isinstance(value, list):
        return all(v is None or _fits(v, kind.element, None) for v in value)
    return fits(value, kind)


def _check_values(
    rows: list[dict[str, Any]], schema: Struct, timestamps: dict[tuple[str, ...], Any]
) -> dict[str, int]:
    """Every typed value against DuckDB's extraction; the rescued values per pointer."""
    leaves = _leaves(schema)
    extracted = _extracted(rows, [path for path, _ in leaves])
    rescued: dict[str, int] = {}
    for row, values in zip(rows, extracted, strict=True):
        found = json.loads(row["rescued"], parse_float=Exact) if row["rescued"] else {}
        for (path, kind), raw in zip(leaves, values, strict=True):
            typed: Any = row["payload"]
            for name in path:
                typed = None if typed is None else typed.get(name)
            pointer = "/" + "/".join(path)
            notation = timestamps.get(path)
            if raw is None:
                assert typed is None, (pointer, row["data"])
                assert pointer not in found
            elif _fits(raw, kind, notation):
                assert typed == _column_value(raw, kind, notation), (pointer, row["data"], typed)
                assert pointer not in found
            else:
                # pyiceberg 0.12 reads a null list of structs as [] (the file holds null:
                # apache/iceberg-python#3833; checked in the file itself below).
                quirk = (
                    typed == [] and isinstance(kind, ListOf) and isinstance(kind.element, Struct)
                )
                assert typed is None or quirk, (pointer, row["data"], typed)
                assert found[pointer] == raw, (pointer, row["data"], found)
                rescued[pointer] = rescued.get(pointer, 0) + 1
        assert set(found) <= {"/" + "/".join(path) for path, _ in leaves}, found
    return rescued


def test_drifting_producers_typed_columns_rescued_values_schema_history(
    tmp_path: Path, spark: SparkSession
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "out"
    for hour in range(3):
        _write_hour(archive, hour)
    versions = []
    manifests = []
    for hour in range(3):
        manifests.append(compact(spark, _job(archive, output, hour)))
        table = open_table(table_ref(f"file://{output}", STREAM), create=False)
        assert table is not None
        versions.append(len(table.metadata.schemas))
    # Created, typed by hour 00, coupon and items added by 01, big by 02: one version each.
    assert versions == [2, 3, 4]
    assert table is not None
    schema = payload_schema(table)
    assert schema is not None
    assert _type_at(schema, "big") == BIG_INTEGER
    assert _type_at(schema, "user", "age") == LONG
    assert _type_at(schema, "ts") == STRING  # not declared: text
    rows = _rows(output)
    assert len(rows) == 36
    rescued = _check_values(rows, schema, {})
    # Hour 02: ages as text (i = 0, 4, 8), a list with an element that does not fit (5),
    # a list of strings with a number (7): each list rescued whole.
    assert rescued == {"/user/age": 3, "/items": 1, "/tags": 1}
    assert manifests[2].payload["rescued"] == rescued
    assert manifests[2].payload["rescued_rows"] == 5
    (written,) = output.glob("stream=orders/data/*/dt=2026-11-21/hour=02/*.parquet")
    in_file = pq.read_table(written).to_pylist()
    # Every typed leaf is written without a dictionary (lists' elements too); the
    # envelope's repeated columns keep theirs.
    group = pq.ParquetFile(written).metadata.row_group(0)
    dictionary = {
        group.column(i).path_in_schema: group.column(i).has_dictionary_page
        for i in range(group.num_columns)
    }
    assert "payload.tags.list.element" in dictionary
    assert "payload.items.list.element.sku" in dictionary
    assert not [p for p, has in dictionary.items() if has and p.startswith("payload.")]
    assert dictionary["stream"]
    assert dictionary["shard_id"]
    assert [r["payload"]["items"] for r in in_file if '"sku":7' in r["data"]] == [None]
    assert [m.payload["schema_changed"] for m in manifests] == [True, True, True]
    # Required: what every record of hour 00 set, from the run that made the column;
    # coupon and items came later (optional); hour 02's ages as text and its list with a
    # number relaxed /user/age and /tags (their values rescued, so the columns had none
    # there): a second pass, so that no placeholder is published.
    assert manifests[0].payload["required"] == [
        "/amount",
        "/id",
        "/tags",
        "/ts",
        "/user",
        "/user/age",
        "/user/name",
    ]
    assert [m.payload["passes"] for m in manifests] == [1, 1, 2]
    assert [m.payload["relaxed"] for m in manifests] == [{}, {}, {"/tags": 1, "/user/age": 3}]
    assert "/user/age" not in manifests[2].payload["required"]
    assert [f.name for f in schema.fields if f.required] == ["amount", "id", "ts", "user"]
    (first,) = output.glob("stream=orders/data/*/dt=2026-11-21/hour=00/*.parquet")
    arrow = pq.read_schema(first).field("payload").type
    assert not arrow.field("id").nullable
    assert not arrow.field("user").type.field("age").nullable
    assert pq.read_schema(written).field("payload").type.field("user").type.field("age").nullable
    assert all(
        isinstance(r["payload"]["user"]["age"], int) for r in in_file if '"thirty"' not in r["data"]
    )
    # The analysis counts the rescued values of its window per place, from the table.
    day = Window.parse("2026-11-21")
    job = AnalyseJob(f"file://{output}", STREAM, day, f"file://{tmp_path / 'reports'}")
    analysis = analyse(spark, job)
    assert analysis.rescued == [
        RescuedStat("/user/age", 3),
        RescuedStat("/items", 1),
        RescuedStat("/tags", 1),
    ]
    assert "rescued       5 values: /user/age 3, /items 1, /tags 1" in render_text(analysis)
    page = (tmp_path / "reports" / f"stream={STREAM}" / "2026-11-21" / "report.html").read_text()
    assert "Rescued payload values" in page
    # Hour 02 alone into a new table: its sample shows the ages as numbers and text;
    # the commoner kind (9 numbers) makes the column, the 3 texts are rescued. Inside
    # lists no kind is chosen: the tags and the items' sku get no column.
    alone = compact(spark, _job(archive, tmp_path / "alone", 2))
    assert alone.payload["rescued"] == {"/user/age": 3}
    assert alone.payload["passes"] == 1  # two kinds in the sample: never required
    # The sample reads the objects the run reads, the hours before for their duplicates
    # too: big (only from hour 02 on) is optional, the fields every hour has required.
    assert alone.payload["required"] == ["/amount", "/id", "/ts", "/user", "/user/name"]
    assert "/user/age" in alone.payload["columns"]
    assert alone.payload["untyped"] == ["/items/element/sku", "/tags/element"]
    # A re-run of an hour (a late object) changes no schema.
    _write_hour(archive, 2, count=14)
    again = compact(spark, _job(archive, output, 2))
    assert again.payload["schema_changed"] is False
    table = open_table(table_ref(f"file://{output}", STREAM), create=False)
    assert table is not None
    assert len(table.metadata.schemas) == 4


def test_declared_schema_timestamps_decimals_and_a_missed_field(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "out"
    _write_hour(archive, 3, count=20)
    declared = read_declared(
        {
            "type": "object",
            "properties": {
                "ts": {"type": "string", "format": "date-time"},
                "sent_ms": {"type": "integer", "format": "unix-time-ms"},
                "price": {"type": "number", "format": "decimal", "precision": 10, "scale": 2},
                "id": {"type": "integer", "format": "int32"},
            },
        }
    )
    # A sample of no object: the first pass knows only the declared fields; the rest
    # are found as it writes, and a second pass writes them.
    monkeypatch.setattr("sparkjobs.compaction.typedwrite.sample_keys", lambda sizes: [])
    # A small target: the hour is three files, and typing again keeps each one a file.
    size = sum(p.stat().st_size for p in archive.rglob("*.jsonl.gz"))
    target = size // 3 + 1
    manifest = compact(
        spark,
        _job(
            archive,
            output,
            3,
            payload_schema="declared",
            declared=declared,
            target_file_bytes=target,
        ),
    )
    assert manifest.payload["passes"] == 2
    assert [h.output_files for h in manifest.hours] == [3]
    data_files = list(output.glob("stream=orders/data/*/dt=*/hour=*/*.parquet"))
    assert len(data_files) == 3
    table = open_table(table_ref(f"file://{output}", STREAM), create=False)
    assert table is not None
    schema = payload_schema(table)
    assert schema is not None
    assert _type_at(schema, "price") == Decimal(10, 2)
    assert _type_at(schema, "ts") == TIMESTAMP
    assert _type_at(schema, "id") == INT  # declared int32: no value past 32 bits
    assert {f.name for f in schema.fields} >= {"items", "big", "user", "coupon"}
    # Fields the window shows with two types get no column (declare them): the ages
    # (numbers and text) and the items' sku (text and a number).
    assert manifest.payload["untyped"] == ["/items/element/sku", "/user/age"]
    rows = _rows(output)
    assert len(rows) == 20
    rescued = _check_values(rows, schema, dict(declared.timestamps))
    assert rescued == {"/sent_ms": 3, "/price": 1}
    assert manifest.payload["rescued"] == rescued
    # Strict: the window fails, in one line naming the places, and nothing is published.
    strict = tmp_path / "strict"
    job = _job(archive, strict, 3, payload_schema="declared", declared=declared, strict=True)
    with pytest.raises(CompactionError) as refused:
        compact(spark, job)
    assert str(refused.value) == (
        "strict: 4 record(s) in 2026-11-21T03 have payload values that fit no column, at "
        "/price (1), /sent_ms (3): declare their type (LANDER_PAYLOAD_SCHEMA) or run "
        "without --strict to keep them in rescued"
    )
    assert not list(strict.glob("stream=orders/data/*/dt=*/*/*.parquet"))


def test_without_the_jar_spark_types_the_same_rows(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session without the typed function (no ``javac``, an older jar) types with
    Spark's expressions: the same columns, values, rescued places and counts, a second
    pass included (test_typed_jvm.py compares the two on thousands of payloads)."""
    archive = tmp_path / "archive"
    _write_hour(archive, 2)
    _write_hour(archive, 3, count=20)
    declared = read_declared(
        {
            "type": "object",
            "properties": {
                "sent_ms": {"type": "integer", "format": "unix-time-ms"},
                "price": {"type": "number", "format": "decimal", "precision": 10, "scale": 2},
            },
        }
    )
    options = {"payload_schema": "declared", "declared": declared}
    found = {}
    for engine in ("jvm", "spark"):
        if engine == "spark":
            monkeypatch.setattr("sparkjobs.compaction.typedjvm.typed_frame", lambda *a: None)
        output = tmp_path / engine
        # Hour 02 without a sample: its fields are found as it writes (a second pass).
        monkeypatch.setattr("sparkjobs.compaction.typedwrite.sample_keys", lambda sizes: [])
        runs = [compact(spark, _job(archive, output, 2, **options))]
        monkeypatch.setattr("sparkjobs.compaction.typedwrite.sample_keys", sample_keys)
        runs.append(compact(spark, _job(archive, output, 3, **options)))
        assert [m.payload["engine"] for m in runs] == [engine, engine]
        rows = sorted(_rows(output), key=lambda r: r["sequence_number"])
        found[engine] = (
            [{k: v for k, v in m.payload.items() if k != "engine"} for m in runs],
            [r["payload"] for r in rows],
            [json.loads(r["rescued"]) if r["rescued"] else None for r in rows],
        )
    assert found["jvm"] == found["spark"]
    manifests = found["jvm"][0]
    assert [m["passes"] for m in manifests] == [2, 1]
    # Hour 03: ages as text in 5 of 20 (numbers the commoner kind), a price with three
    # decimals, 3 epochs as text; hour 02 had no column for what it rescues there.
    assert [m["rescued"] for m in manifests] == [
        {},
        {"/price": 1, "/sent_ms": 3, "/user/age": 5},
    ]
    assert manifests[1]["untyped"] == ["/items/element/sku"]
