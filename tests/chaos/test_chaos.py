"""Exactly once under chaos: the short profile in every CI run (`make test-deep`), the soak
on demand."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.chaos.scenario import SHORT, run, soak

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _seed() -> int:
    return int(os.environ.get("CHAOS_SEED") or random.randrange(1_000_000))


@pytest.mark.deep  # 80-100 s each: the chaos matrix
@pytest.mark.emulator
@pytest.mark.processes
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("coordination", "read_mode", "streams"),
    [("scan", "polling", 1), ("board", "polling", 3), ("board", "efo", 1)],
)
def test_short_chaos_run_lands_every_record_exactly_once(
    tmp_path: Path, spark: SparkSession, coordination: str, read_mode: str, streams: int
) -> None:
    """kill -9, SIGSTOP past failover (of any worker, and of the leader), SIGTERM, a
    join, a split, a merge, deleted lease items and faults on every AWS call, under both
    coordination modes and, on kinesis-local, in the efo read mode (subscriptions cut
    mid-stream too); under board coordination one fleet reads three streams, one of them
    created and one deleted mid-run: the archive holds each record once by position and
    the compaction each event id once."""
    profile = replace(SHORT, coordination=coordination, read_mode=read_mode, streams=streams)
    outcome = run(profile, _seed(), tmp_path, spark)
    print(outcome.report())
    assert outcome.ok, outcome.report()


@pytest.mark.soak
@pytest.mark.emulator  # a LocalStack of its own, worker processes, a Spark session
@pytest.mark.processes
@pytest.mark.spark
@pytest.mark.timeout(4 * 3600)
def test_soak(tmp_path: Path) -> None:
    """CHAOS_MINUTES (default 30) of chaos at 650 records/s: 1M+ records."""
    minutes = float(os.environ.get("CHAOS_MINUTES", "30"))
    outcome = run(soak(minutes), _seed(), tmp_path)
    print(outcome.report())
    assert outcome.ok, outcome.report()
