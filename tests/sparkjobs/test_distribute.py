"""One write task per file (sparkjobs.compaction.distribute): the keys chosen for the
groups land each on its own task, by Spark's own hash partitioning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.compaction.distribute import first_groups, spark_hash_int, task_keys, task_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@given(st.integers(1, 400))
def test_every_task_gets_a_key_of_its_own(tasks: int) -> None:
    keys = task_keys(tasks)
    assert [task_of(key, tasks) for key in keys] == list(range(tasks))
    assert len(set(keys)) == tasks
    assert all(key >= 0 for key in keys)


@given(st.lists(st.integers(1, 50), max_size=48))
def test_each_hours_shares_are_its_own_run_of_groups(files: list[int]) -> None:
    firsts = first_groups(files)
    groups = [first + share for first, n in zip(firsts, files, strict=True) for share in range(n)]
    assert groups == list(range(sum(files)))


def test_the_hash_and_the_tasks_are_sparks(spark: SparkSession) -> None:
    """Spark's hash() of an int, and the task repartition(n, column) sends it to."""
    from pyspark.sql import functions as sf

    values = [0, 1, -1, 42, 2**31 - 1, -(2**31), *range(2, 300, 7)]
    frame = spark.createDataFrame([(v,) for v in values], "k int")
    hashed = {r["k"]: r["h"] for r in frame.select("k", sf.hash("k").alias("h")).collect()}
    assert hashed == {v: spark_hash_int(v) for v in values}
    for tasks in (1, 3, 24, 37):
        keys = task_keys(tasks)
        spread = spark.createDataFrame([(k,) for k in keys], "k int").repartition(tasks, "k")
        placed = spread.select("k", sf.spark_partition_id().alias("task")).collect()
        assert sorted((keys.index(r["k"]), r["task"]) for r in placed) == [
            (i, i) for i in range(tasks)
        ]
