"""Spark's loggers kept quiet where the compaction expects what they would print.

The fast read trusts the gzip streams, so a damaged object fails it
(:mod:`sparkjobs.compaction.damage`): a case the job handles, by checking every object
and reading again. Spark does not know that. It logs the task's failure with the whole
Java stack trace, three times (the executor's "Exception in task", the scheduler's
"Lost task" and "aborting job", the writer's "Aborting job"), and a nightly run's stderr
read like a crash while it exits with the bad input reported. The second read, told to
skip what does not decode, logs a stack trace for each damaged object it skips
(``ignoreCorruptFiles``), all of them objects the check has already reported.

:func:`quieted` switches off exactly those loggers for exactly that read and restores
them after it. Nothing is hidden: a fast read that fails for any other reason is logged
by the job with the failure's whole text (:func:`sparkjobs.compaction.compact.compact`),
and the second read's own failures are left to Spark's loggers as they are. Where the
JVM's logging is not Log4j 2 (another binding on a cluster), nothing is changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TASK_FAILURE = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.storage.ShuffleBlockFetcherIterator",
    "org.apache.spark.storage.DiskBlockObjectWriter",
)
"""Who logs a failed task of the fast read, each with the stack trace: "Exception in
task", "Lost task" and "Task … failed 1 times; aborting job", "Aborting job"; and, with
more than one core, the tasks the failure interrupted: "Error occurred while fetching
local blocks", "Error deleting …/temp_shuffle_…"."""
SKIPPED_FILES = ("org.apache.spark.sql.execution.datasources.FileScanRDD",)
"""Who logs, with a stack trace, each damaged object the second read skips."""


@contextmanager
def quieted(spark: SparkSession, loggers: Sequence[str]) -> Iterator[None]:
    """``loggers`` off in the session's JVM while the block runs, then as they were."""
    saved = _silence(spark, loggers)
    try:
        yield
    finally:
        if saved is not None:
            _restore(spark, saved)


def _log4j(spark: SparkSession) -> tuple[Any, Any, Any]:
    """Log4j 2's context, its configuration and Configurator, through the gateway."""
    jvm: Any = spark.sparkContext._jvm
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    return (
        context,
        context.getConfiguration(),
        jvm.org.apache.logging.log4j.core.config.Configurator,
    )


def _silence(spark: SparkSession, loggers: Sequence[str]) -> dict[str, Any] | None:
    """Each logger's own level before (None: it had no configuration of its own), or
    None when Log4j 2 is not there."""
    try:
        _, config, configurator = _log4j(spark)
        own = config.getLoggers()
        saved = {
            name: own.get(name).getLevel() if own.containsKey(name) else None for name in loggers
        }
        off = spark.sparkContext._jvm.org.apache.logging.log4j.Level.OFF  # type: ignore[union-attr]
        for name in loggers:
            configurator.setLevel(name, off)
    except (Py4JError, AttributeError, TypeError):
        return None
    return saved


def _restore(spark: SparkSession, saved: dict[str, Any]) -> None:
    try:
        context, config, configurator = _log4j(spark)
        for name, level in saved.items():
            if level is None:
                config.removeLogger(name)
            else:
                configurator.setLevel(name, level)
        context.updateLoggers()
    except (Py4JError, AttributeError, TypeError):
        return
