"""The Spark jobs end to end on s3a://, against the embedded moto S3.

``python -m sparkjobs compact`` and ``analyse`` run as real processes, as a nightly job
would, with the S3A connector jars on ``spark.jars`` (:mod:`tests.support.s3a`). What
they wrote is then read back without Spark: boto3 for the objects, DuckDB for the
Parquet. Skipped when the jars are not on this machine (``make s3a-jars``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import duckdb
import pytest

from consumer.archive.layout import object_key
from consumer.cli.emulators import LocalStack
from consumer.landing.deflate import gzip_stream
from consumer.landing.envelope import Encoder, EventIdPointer
from consumer.sequence import Position
from consumer.stream.records import Record
from sparkjobs.catalog import table_ref
from sparkjobs.table.table import files_of, open_table, published
from tests.support.s3a import REPO, find_jars, spark_submit_args

JARS = find_jars()

pytestmark = [
    pytest.mark.emulator,
    pytest.mark.processes,  # `python -m sparkjobs` ...
    pytest.mark.spark,  # ... which starts a Spark JVM
    pytest.mark.skipif(
        JARS is None,
        reason="the S3A connector jars are not on this machine: run `make s3a-jars` to fetch them",
    ),
]

STREAM = "orders"
WINDOW = "2026-01-01T10"
HOUR = datetime(2026, 1, 1, 10, tzinfo=UTC)
SHARD_A = "shardId-000000000000"
SHARD_B = "shardId-000000000001"
BASE = 49_600_000_000_000_000_000_000_000_000_000_000_000_000_000_000  # 56 digits
JOB_TIMEOUT = 600.0


@dataclass(frozen=True)
class Sent:
    """One user record as the producer put it."""

    shard: str
    sequence: int
    arrival: datetime
    event_id: str

    @property
    def payload(self) -> dict[str, Any]:
        """The JSON the producer sent (a re-send carries the same)."""
        return {"event_id": self.event_id, "amount": int(self.event_id[1:]) * 10}

    def record(self) -> Record:
        """The Kinesis user record."""
        return Record(
            shard_id=self.shard,
            position=Position(self.sequence),
            partition_key=f"customer-{self.event_id}",
            data=json.dumps(self.payload).encode(),
            arrival=self.arrival,
        )


def _at(minute: int, second: int, ms: int = 0) -> datetime:
    return HOUR + timedelta(minutes=minute, seconds=second, milliseconds=ms)


# Shard A, minute 05: e1-e4. Minute 06: e5, then e2 again (a producer retry: same
# payload, so the same event id, a new sequence number, a later arrival).
# Shard B, minute 07: e6, e7.
E = [
    Sent(SHARD_A, BASE + 101, _at(5, 1, 111), "e1"),
    Sent(SHARD_A, BASE + 102, _at(5, 2, 222), "e2"),
    Sent(SHARD_A, BASE + 103, _at(5, 3, 333), "e3"),
    Sent(SHARD_A, BASE + 104, _at(5, 4, 444), "e4"),
    Sent(SHARD_A, BASE + 105, _at(6, 1, 555), "e5"),
    Sent(SHARD_B, BASE + 201, _at(7, 1, 666), "e6"),
    Sent(SHARD_B, BASE + 202, _at(7, 2, 777), "e7"),
]
RETRY = Sent(SHARD_A, BASE + 106, _at(6, 2, 888), "e2")


def _objects(prefix: str) -> dict[str, bytes]:
    """The landed archive: keys and gzip bodies exactly as the lander writes them."""
    encoder = Encoder(STREAM, "json", EventIdPointer("/event_id"))

    def run(records: list[Sent]) -> tuple[str, bytes]:
        lines = []
        for sent in records:
            encoded = encoder.encode(sent.record())
            assert isinstance(encoded, tuple)
            lines.append(encoded[0])
        compressor = gzip_stream()
        body = compressor.compress(b"".join(lines)) + compressor.flush()
        first, last = records[0], records[-1]
        key = object_key(
            prefix,
            STREAM,
            first.shard,
            first.arrival.replace(second=0, microsecond=0),
            first=Position(first.sequence),
            last=Position(last.sequence),
        )
        return key, body

    runs = [
        E[0:4],  # shard A, 10:05, 101-104
        E[1:3],  # transport duplicate: 102-103 again, identical lines, another key
        [E[4], RETRY],  # shard A, 10:06, 105-106
        E[5:7],  # shard B, 10:07
    ]
    return dict(run(records) for records in runs)


@pytest.fixture(scope="module")
def s3(local_stack: LocalStack) -> Iterator[Any]:
    """A boto3 S3 client on the embedded moto."""
    env = local_stack.env()
    client = boto3.client(
        "s3",
        endpoint_url=local_stack.s3_endpoint,
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    try:
        yield client
    finally:
        client.close()


def _keys(s3: Any, bucket: str, prefix: str) -> dict[str, str]:
    """Every key under ``prefix`` and its ETag."""
    found: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found.update((o["Key"], o["ETag"]) for o in page.get("Contents", []))
    return found


def _catalog(local_stack: LocalStack, cwd: Path) -> dict[str, str]:
    """A pyiceberg SQL catalog (SQLite in ``cwd``) whose FileIO reaches the emulator's S3:
    configured by variables, as a user configures Glue or REST."""
    aws = local_stack.env()
    prefix = "PYICEBERG_CATALOG__LANDER__"
    return {
        f"{prefix}TYPE": "sql",
        f"{prefix}URI": f"sqlite:///{cwd / 'catalog.db'}",
        f"{prefix}S3__ENDPOINT": local_stack.s3_endpoint,
        f"{prefix}S3__ACCESS_KEY_ID": aws["AWS_ACCESS_KEY_ID"],
        f"{prefix}S3__SECRET_ACCESS_KEY": aws["AWS_SECRET_ACCESS_KEY"],
        f"{prefix}S3__REGION": aws["AWS_REGION"],
    }


def _job(local_stack: LocalStack, cwd: Path, *args: str) -> str:
    """Run ``python -m sparkjobs ARGS`` on the S3A jars; its stdout (stderr on failure)."""
    assert JARS is not None
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LANDER_", "PYSPARK_", "PYICEBERG_"))
    }
    env.update(local_stack.env())
    env.update(_catalog(local_stack, cwd))
    env["PYSPARK_SUBMIT_ARGS"] = spark_submit_args(JARS, local_stack.s3_endpoint)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["LANDER_LOG_FORMAT"] = "console"
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sparkjobs", *args],
            cwd=cwd,  # Spark may leave spark-warehouse/ or derby.log in its working folder
            env=env,
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        partial = exc.stderr or ""
        stderr = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        pytest.fail(f"sparkjobs {args[0]} timed out after {JOB_TIMEOUT:.0f}s; stderr:\n{stderr}")
    # Shown by pytest for a failing test (and with -rP): where the minutes went, warnings.
    print(f"sparkjobs {args[0]}: exit {done.returncode} in {time.monotonic() - started:.1f}s")
    print(done.stderr[-4000:], file=sys.stderr)
    if done.returncode != 0:
        pytest.fail(
            f"sparkjobs {args[0]} exited {done.returncode}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return done.stdout


@pytest.mark.timeout(3 * JOB_TIMEOUT + 120)
def test_compact_and_analyse_on_s3a(local_stack: LocalStack, s3: Any, tmp_path: Path) -> None:
    """Pins the jobs on s3a://: compaction reads gzip JSON Lines from S3, drops the
    transport and the producer duplicate, publishes Parquet holding exactly the unique
    records in an Iceberg table whose paths are ``s3://`` (with the run's manifest and
    the hour's entry in the snapshot), a rerun of the same inputs is up to date and
    writes nothing, and the analysis writes report.html and its tables to S3."""
    bucket = f"lander-s3a-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    for key, body in _objects("archive").items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    archive, output, reports = (f"s3a://{bucket}/{p}" for p in ("archive", "compacted", "reports"))
    work = tmp_path / "work"
    work.mkdir()

    out = _job(
        local_stack,
        work,
        "compact",
        *("--stream", STREAM, "--archive", archive, "--compacted", output, "--window", WINDOW),
    )
    assert re.search(
        rf"{WINDOW}: published; hours rewritten 1, unchanged 0; rows in 10, out 7; "
        r"duplicates removed: transport 2, producer 1; bad input 0; run ",
        out,
    ), out

    with pytest.MonkeyPatch.context() as patch:
        for name, value in _catalog(local_stack, work).items():
            patch.setenv(name, value)
        table = open_table(table_ref(output, STREAM), create=False)
        assert table is not None
        entry = published(table)[WINDOW]
        uris = files_of(table, [WINDOW])
    assert table.location() == f"s3://{bucket}/compacted/stream={STREAM}"
    assert (entry.rows, entry.inputs) == (7, 4)
    manifest_key = f"compacted/_manifests/stream={STREAM}/{entry.run_id}.json"
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read())
    assert manifest["status"] == "published"
    assert manifest["archive"] == archive
    assert {k: manifest["totals"][k] for k in ("input_files", "input_rows", "output_rows")} == {
        "input_files": 4,
        "input_rows": 10,
        "output_rows": 7,
    }
    assert (manifest["totals"]["transport"], manifest["totals"]["producer"]) == (2, 1)
    assert manifest["bad_files"] == []

    # The published files, read by another engine: exactly the unique records, each the
    # earliest copy (e2 from minute 05, not the retry at 106).
    local: list[str] = []
    data = f"s3://{bucket}/compacted/stream={STREAM}/data/{entry.run_id}/dt=2026-01-01/hour=10/"
    assert uris
    for i, uri in enumerate(uris):
        assert uri.startswith(data), uri
        path = tmp_path / f"part-{i}.parquet"
        s3.download_file(bucket, uri.removeprefix(f"s3://{bucket}/"), str(path))
        local.append(str(path))
    with duckdb.connect() as db:
        rows = db.execute(
            "SELECT stream, shard_id, sequence_number, subsequence_number, partition_key,"
            " CAST(arrival_ts AS VARCHAR), landed_ts IS NOT NULL, event_id, data"
            " FROM read_parquet(?) ORDER BY event_id",
            [local],
        ).fetchall()
    assert [r[7] for r in rows] == [s.event_id for s in E]
    for row, sent in zip(rows, E, strict=True):
        assert row[:5] == (
            STREAM,
            sent.shard,
            str(sent.sequence),
            0,
            f"customer-{sent.event_id}",
        )
        # TIMESTAMP WITH TIME ZONE as text, in whatever zone DuckDB runs in: compare
        # the instant, not the text.
        assert datetime.fromisoformat(row[5]) == sent.arrival
        assert row[6], "landed_ts is the object's modification time"
        assert json.loads(row[8]) == sent.payload

    # The same inputs again: nothing to do, nothing written.
    before = _keys(s3, bucket, "compacted/")
    again = _job(
        local_stack,
        work,
        "compact",
        *("--stream", STREAM, "--archive", archive, "--compacted", output, "--window", WINDOW),
    )
    assert re.search(rf"{WINDOW}: up-to-date; hours rewritten 0, unchanged 1;", again), again
    assert _keys(s3, bucket, "compacted/") == before

    report_out = _job(
        local_stack,
        work,
        "analyse",
        *("--stream", STREAM, "--compacted", output, "--window", WINDOW),
        *("--reports", reports, "--archive", archive),
    )
    assert re.search(r"records\s+7 ", report_out), report_out
    assert "transport 2, producer 1" in report_out, report_out
    folder = f"reports/stream={STREAM}/{WINDOW}"
    assert f"report: {reports}/stream={STREAM}/{WINDOW}/report.html" in report_out
    html = s3.get_object(Bucket=bucket, Key=f"{folder}/report.html")["Body"].read().decode()
    assert "<html" in html.lower()
    assert STREAM in html
    tables = _keys(s3, bucket, f"{folder}/tables/")
    assert any(k.endswith(".parquet") for k in tables), sorted(tables)

    # Nothing of the job is left in the archive, and the archive is as it was put.
    assert set(_keys(s3, bucket, "archive/")) == set(_objects("archive"))
    for key, body in _objects("archive").items():
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
