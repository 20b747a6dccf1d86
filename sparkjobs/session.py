"""The Spark session the jobs run in, tuned for compaction-sized work.

Under ``spark-submit`` the cluster's settings win (``getOrCreate`` returns the session
spark-submit built, and only settings not already given are added). Run locally, the
session is ``local[*]`` with a small shuffle: 200 shuffle partitions for a few hundred
MB turns into 200 tiny tasks, the largest single cost measured on 2 cores.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULTS: dict[str, str] = {  # SQL settings: a running session accepts them
    "spark.sql.session.timeZone": "UTC",
    # INT96, Spark's default, loses the time zone for other readers.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # List folders on the driver: a distributed listing job costs more than it saves.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.files.maxPartitionBytes": str(64 << 20),
    # Landed objects are small: the default 4 MB "cost" of opening one made ~200 tasks of
    # a few files each for a day; 256 KB packs a task with a few hundred (-10% CPU).
    "spark.sql.files.openCostInBytes": str(256 << 10),
}


def local_settings(cores: int | None = None) -> dict[str, str]:
    """Settings for a local run: the defaults plus a shuffle sized to the cores."""
    cores = cores or os.cpu_count() or 2
    return {
        **DEFAULTS,
        "spark.sql.shuffle.partitions": str(min(16, max(2, 2 * cores))),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Throughput collector: G1's concurrent work cost a day's compaction ~20% more CPU.
        "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
        "spark.driver.memory": os.environ.get("LANDER_SPARK_DRIVER_MEMORY", "2g"),
    }


def get_session(master: str | None = None, app: str = "kinesis-lander") -> SparkSession:
    """The active session, or a new one (local unless ``master`` or spark-submit says)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app)
    # spark-submit starts Python from its JVM and hands it the gateway's port.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or not submitted:
        # Local workers must run this interpreter, so they import what the driver does;
        # pyspark reads the variable, not the setting, when it starts them.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master or "local[*]")
        for key, value in local_settings().items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    given = spark.sparkContext.getConf()
    for key, value in DEFAULTS.items():
        if not given.contains(key):
            spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(os.environ.get("LANDER_SPARK_LOG_LEVEL", "WARN"))
    return spark
