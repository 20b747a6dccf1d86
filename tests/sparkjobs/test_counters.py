"""The compaction's counts by hour and cause: the jar's one aggregate against Spark's
counters (:mod:`sparkjobs.compaction.counters`).

Both ways observe the same rows of random codes (nulls and unused causes included) in
one Spark plan and must give the same counts, which are also counted here in Python.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Observation
from pyspark.sql import functions as sf

from sparkjobs.compaction import counters
from sparkjobs.compaction.counters import CAUSES, SEQUENCE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOURS = [f"2026-11-21T{h:02d}" for h in range(24)]


@pytest.fixture(scope="module")
def registered(spark: SparkSession) -> SparkSession:
    assert counters.enable(spark), "the test session has no reader jar"
    return spark


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hours=st.integers(min_value=1, max_value=24),
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(min_value=0, max_value=23)),
            st.integers(min_value=0, max_value=CAUSES - 1),
        ),
        max_size=300,
    ),
    sequence=st.booleans(),
)
@pytest.mark.deep  # ~8 s: the Spark matrix (one aggregate and the counters)
def test_one_aggregate_counts_as_the_counters_do(
    registered: SparkSession,
    hours: int,
    rows: list[tuple[int | None, int]],
    sequence: bool,
) -> None:
    spark, names = registered, HOURS[:hours]
    # A slot past the window's hours is a line of no rewritten hour: counted by neither.
    if not sequence:
        rows = [(slot, cause) for slot, cause in rows if cause != SEQUENCE]
    data = [(slot if slot is None or slot < hours else None, cause) for slot, cause in rows]
    frame = spark.createDataFrame(data, "slot int, cause int").select(
        sf.col("slot").alias("malformed"),
        sf.when(sf.col("slot").isNotNull(), sf.col("slot") * CAUSES + sf.col("cause")).alias(
            "code"
        ),
    )
    seen = {}
    for fast in (True, False):
        before, after = Observation(f"m{fast}"), Observation(f"c{fast}")
        frame.observe(before, *counters.malformed_counters(names, fast=fast)).observe(
            after, *counters.cause_counters(names, fast=fast, sequence=sequence)
        ).count()
        seen[fast] = (
            counters.malformed_counts(before.get, names, fast=fast),
            counters.cause_counts(after.get, names, fast=fast, sequence=sequence),
        )
    by_slot = Counter(slot for slot, _ in data if slot is not None)
    by_code = Counter((slot, cause) for slot, cause in data if slot is not None)
    causes = ["kept", "transport", "producer", None, "sequence"]
    want = (
        {hour: by_slot[i] for i, hour in enumerate(names)},
        {
            f"{causes[cause]}|{hour}": by_code[i, cause]
            for i, hour in enumerate(names)
            for cause in range(CAUSES)
            if causes[cause] and (sequence or cause != SEQUENCE)
        },
    )
    assert seen[True] == want
    assert seen[False] == want


def test_a_code_out_of_range_fails_the_plan(registered: SparkSession) -> None:
    frame = registered.createDataFrame([(counters.CODES,)], "code int")
    with pytest.raises(Exception, match=f"code {counters.CODES} is not in 0..{counters.CODES - 1}"):
        frame.observe(
            Observation("x"), *counters.cause_counters(HOURS, fast=True, sequence=False)
        ).count()


def test_without_the_class_the_counters_are_spark_s_own(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jar without the class (an older one named by LANDER_SPARK_READER_JAR) leaves
    the counters: the run still counts, the slow way."""
    monkeypatch.setattr(counters, "COUNTS_CLASS", "kinesislander.spark.NoSuchCounts")
    assert not counters.enable(spark)
    columns = counters.cause_counters(HOURS, fast=False, sequence=True)
    assert len(columns) == 24 * 4


def test_more_codes_than_one_aggregate_holds_fall_back_to_the_counters() -> None:
    hours = [f"h{i}" for i in range(counters.CODES // CAUSES + 1)]
    columns = counters.cause_counters(hours, fast=True, sequence=False)
    assert len(columns) == len(hours) * 3
