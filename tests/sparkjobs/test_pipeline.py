"""End to end: worker processes land a stream, spark-submit compacts, lander analyses.

The stream gets unique records, producer retries of some of them (same id, new
sequence number) and one payload that is not JSON, while a worker is killed with
SIGKILL part way. The archive is read back with gzip and json, the compacted
Parquet with DuckDB: every id exactly once, the retries counted as producer duplicates,
the bad payload as a dead letter.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from consumer.cli.harness import wait_until
from sparkjobs.catalog import table_ref
from sparkjobs.table.compacted import current_files
from sparkjobs.window import Window
from tests.support.cluster import REPO, Cluster

# ~68 s, two spark-submit JVMs: the deep tier (the demo runs the pipeline in the fast one).
pytestmark = [pytest.mark.deep, pytest.mark.emulator, pytest.mark.processes, pytest.mark.spark]


def _archive_lines(root: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted(root.glob("stream=*/dt=*/hour=*/minute=*/shard=*/*.jsonl.gz")):
        lines.extend(json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines())
    return lines


def _put(cluster: Cluster, ids: list[str]) -> None:
    entries = [
        {"Data": json.dumps({"id": i}).encode(), "PartitionKey": uuid.uuid4().hex} for i in ids
    ]
    for start in range(0, len(entries), 100):
        cluster.kinesis.put_records(StreamName=cluster.stream, Records=entries[start : start + 100])


def _run(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{command[:3]} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def test_landed_compacted_and_analysed(aws_env: dict[str, str], tmp_path: Path) -> None:
    """Produce, land with a crash, compact with spark-submit, analyse: counts reconcile."""
    archive = tmp_path / "archive"
    cluster = Cluster(
        aws_env,
        tmp_path / "cluster",
        2,
        extra_env={
            "LANDER_ARCHIVE": f"file://{archive}",
            "LANDER_PROCESSOR": "consumer.landing.lander:Lander",
            "LANDER_EVENT_ID_POINTER": "/id",
            "LANDER_FLUSH_SECONDS": "1",
            "LANDER_MAX_RECORDS_PER_FILE": "40",
        },
    )
    unique = [f"e-{i}" for i in range(300)]
    retried = unique[100:130]
    try:
        _put(cluster, unique[:150])
        cluster.start("w1")
        cluster.start("w2")
        wait_until(lambda: len(_archive_lines(archive)) >= 50, 60, "first records landed")
        cluster.signal("w1", signal.SIGKILL)
        _put(cluster, unique[150:])
        _put(cluster, retried)
        cluster.kinesis.put_record(StreamName=cluster.stream, Data=b"{not json", PartitionKey="x")

        def all_landed() -> bool:
            ids = Counter(line["data"]["id"] for line in _archive_lines(archive))
            return all(ids[i] >= 1 for i in unique) and all(ids[i] >= 2 for i in retried)

        wait_until(all_landed, 90, "every record landed", step=0.5)
    finally:
        cluster.stop_all()

    landed = _archive_lines(archive)
    positions = Counter(
        (x["shard_id"], x["sequence_number"], x["subsequence_number"]) for x in landed
    )
    transport = sum(n - 1 for n in positions.values())
    days = sorted({x["arrival_ts"][:10] for x in landed})
    compacted, reports = tmp_path / "compacted", tmp_path / "reports"
    env = {
        **os.environ,
        **aws_env,
        "PYSPARK_PYTHON": sys.executable,
        "LANDER_STREAM": cluster.stream,
        "LANDER_ARCHIVE": f"file://{archive}",
        "LANDER_COMPACTED": f"file://{compacted}",
    }
    package = _run([sys.executable, "deploy/spark/package.py", str(tmp_path / "jobs.zip")], env)
    submit = Path(sys.executable).with_name("spark-submit")
    summaries = []
    for day in days:
        spark_submit = [str(submit), "--master", "local[2]", "--py-files", package.strip()]
        entry = ["deploy/spark/submit.py", "compact", "--window", day]
        summaries.append(_run(spark_submit + entry, env))
    assert all("published" in s for s in summaries), summaries
    ref = table_ref(compacted.as_uri(), cluster.stream)
    files = [
        uri.removeprefix("file://") for day in days for uri in current_files(ref, Window.parse(day))
    ]
    ids = Counter(
        json.loads(data)["id"]
        for (data,) in duckdb.execute(f"select data from read_parquet({files})").fetchall()
    )
    assert ids == Counter(unique)
    manifests = [
        json.loads(p.read_text())
        for p in compacted.glob(f"_manifests/stream={cluster.stream}/*.json")
    ]
    assert sum(m["totals"]["producer"] for m in manifests) == len(retried)
    assert sum(m["totals"]["transport"] for m in manifests) == transport
    assert sum(m["totals"]["output_rows"] for m in manifests) == len(unique)

    report = _run(
        [sys.executable, "-m", "consumer.cli", "analyse", "--window", days[0],
         "--reports", f"file://{reports}"],
        env,
    )  # fmt: skip
    if len(days) == 1:
        assert "records       300" in report
        assert f"producer {len(retried)}" in report
        assert "dead letters  1 records" in report
    assert "remaining     0 duplicates" in report
    assert (reports / f"stream={cluster.stream}" / days[0] / "report.html").exists()
