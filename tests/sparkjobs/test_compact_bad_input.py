"""Spark's loggers quieted for the read whose failure the compaction handles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkjobs.compaction.quiet import quieted

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_the_quieted_loggers_are_off_for_the_block_and_as_they_were_after(
    spark: SparkSession,
) -> None:
    """One logger with a level of its own, one without (it follows the root's)."""
    jvm: Any = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    own, inherited = "lander.tests.own", "lander.tests.inherited"
    log4j.core.config.Configurator.setLevel(own, log4j.Level.ERROR)
    config = log4j.LogManager.getContext(False).getConfiguration()
    assert not config.getLoggers().containsKey(inherited)
    root = str(log4j.LogManager.getRootLogger().getLevel())

    def level(name: str) -> str:
        return str(log4j.LogManager.getLogger(name).getLevel())

    with quieted(spark, (own, inherited)):
        assert (level(own), level(inherited)) == ("OFF", "OFF")
    assert (level(own), level(inherited)) == ("ERROR", root)
    config = log4j.LogManager.getContext(False).getConfiguration()
    assert not config.getLoggers().containsKey(inherited)
