"""The compacted table in the AWS Glue Data Catalog, over HTTP, against moto's Glue.

The catalog is configured the way a pyiceberg user configures Glue (variables
``PYICEBERG_CATALOG__LANDER__…``); the table's files stay in a local folder, which Glue
does not care about: it records the metadata location. Glue's optimistic concurrency
(``VersionId`` on UpdateTable) is not emulated by moto, so racing commits are tested on
the SQL catalog (tests/sparkjobs/test_compact_race.py).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from bench.archives import generate_archive
from consumer.cli.emulators import LocalStack
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactJob, compact
from sparkjobs.table.table import files_of, open_table, published
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.emulator, pytest.mark.spark]

STREAM = "Orders.EU-1"
PREFIX = "PYICEBERG_CATALOG__LANDER__"


def _glue_env(endpoint: str, local_stack: LocalStack) -> dict[str, str]:
    aws = local_stack.env()
    return {
        f"{PREFIX}TYPE": "glue",
        f"{PREFIX}GLUE__ENDPOINT": endpoint,
        f"{PREFIX}GLUE__REGION": aws["AWS_REGION"],
        f"{PREFIX}GLUE__ACCESS_KEY_ID": aws["AWS_ACCESS_KEY_ID"],
        f"{PREFIX}GLUE__SECRET_ACCESS_KEY": aws["AWS_SECRET_ACCESS_KEY"],
    }


def test_compaction_publishes_to_glue_and_a_rerun_reads_its_state_back(
    spark: SparkSession,
    local_stack: LocalStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table is made in Glue (database ``lander``, the stream's name made a Glue
    name), Glue points at its current metadata, pyiceberg reads it back through Glue,
    and a re-run finds every hour up to date from the snapshot Glue names."""
    for name, value in _glue_env(local_stack.dynamodb_endpoint, local_stack).items():
        monkeypatch.setenv(name, value)
    archive, output = tmp_path / "archive", tmp_path / "compacted"
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9], shards=2,
        records_per_minute=6, records_per_file=9, transport_duplicate_share=0.1, seed=4,
    )  # fmt: skip
    job = CompactJob(archive.as_uri(), STREAM, Window.parse("2026-11-21"), output.as_uri())
    first = compact(spark, job)
    assert first.status == "published"
    assert first.table == "lander.orders_eu_1"

    aws = local_stack.env()
    glue = boto3.client(
        "glue",
        endpoint_url=local_stack.dynamodb_endpoint,
        region_name=aws["AWS_REGION"],
        aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"],
    )
    stored = glue.get_table(DatabaseName="lander", Name="orders_eu_1")["Table"]
    assert stored["Parameters"]["table_type"].upper() == "ICEBERG"
    location = stored["Parameters"]["metadata_location"]
    assert location.startswith(f"{output.as_uri()}/stream=Orders.EU-1/metadata/")

    table = open_table(table_ref(output.as_uri(), STREAM), create=False)
    assert table is not None
    assert table.metadata_location == location
    assert published(table)["2026-11-21T09"].run_id == first.run_id
    assert len(files_of(table, ["2026-11-21T09"])) >= 1
    assert table.scan().to_arrow().num_rows == len(truth.kept)

    again = compact(spark, job)
    assert again.status == "up-to-date"
    stored = glue.get_table(DatabaseName="lander", Name="orders_eu_1")["Table"]
    assert stored["Parameters"]["metadata_location"] == location


def test_an_unreachable_glue_fails_the_job_before_spark_with_one_line(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    """A catalog that cannot be reached is a bad setting: exit 2, one line, no JVM."""
    closed = "http://127.0.0.1:9"  # discard: nothing listens
    env = {
        "PATH": "/usr/bin:/bin",
        "LANDER_STREAM": STREAM,
        "LANDER_ARCHIVE": (tmp_path / "archive").as_uri(),
        "LANDER_COMPACTED": (tmp_path / "out").as_uri(),
        **_glue_env(closed, local_stack),
        # pyiceberg's Glue client retries 10 times with backoff (~45 s here) and ignores
        # AWS_MAX_ATTEMPTS; one attempt shows the same line.
        f"{PREFIX}GLUE__MAX_RETRIES": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "sparkjobs", "compact"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("lander: LANDER_CATALOG: catalog 'lander': ")
    assert "127.0.0.1:9" in lines[0]
    assert not (tmp_path / "out").exists()
