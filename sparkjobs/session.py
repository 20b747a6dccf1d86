"""The Spark session the jobs run in, tuned for compaction-sized work.

Under ``spark-submit`` the cluster's settings win (``getOrCreate`` returns the session
spark-submit built, and only settings not already given are added). Run locally, the
session is ``local[*]`` with a small shuffle: 200 shuffle partitions for a few hundred
MB turns into 200 tiny tasks, the largest single cost measured on 2 cores.

A fresh JVM's fixed cost is half of a small nightly run's CPU (docs/benchmarks.md), so
``lander compact`` and ``lander analyse`` (not a notebook) start theirs with two more
options (:class:`JvmPlan`; the demo and the tests' session take C1 alone):

- an **AppCDS archive** of the classes a run loads (``LANDER_SPARK_CDS``: a file, or
  ``off``; by default one per PySpark and Java under ``$XDG_CACHE_HOME`` or ``~/.cache``).
  When it is missing, the run writes it as the JVM exits and :func:`finish` moves it in
  place; the Spark image builds it at build time. 17 % less CPU on a 200k-line day.
- **C1 only** (``-XX:TieredStopAtLevel=1``) when the run reads less than
  :data:`C1_BELOW_BYTES` of landed gzip: 30 % less CPU for a 200k-line day (21 MiB), but
  41 % more for a 2M-line day (191 MiB), whose run is long enough to repay C2. Known
  only when the archive is listed before the JVM starts (``file://``); otherwise C2.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pyspark
import structlog
from pyspark import SparkContext
from pyspark.sql import SparkSession

from sparkjobs.compaction.objectreader import reader_jar

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


JVM_LOG_OPTIONS = ("-Xlog:disable", "-Xlog:all=warning:stderr")
"""The JVM's own log (unified logging) on stderr, warnings and errors only: by default
it writes its warnings to stdout, where a class archive that does not match this JVM
or class path put ``[warning][cds…]`` lines among the job's result lines."""

C1_BELOW_BYTES = 64 << 20
"""Landed gzip bytes under which a run's JVM compiles with C1 only (measured crossover
about 70 MiB: docs/benchmarks.md)."""


@dataclass(frozen=True, slots=True)
class JvmPlan:
    """Options of a job's JVM beyond the defaults: a class archive, the JIT."""

    class_archive: Path | None = None
    """Where the AppCDS archive is, or is to be written; None: no archive."""
    c1_only: bool = False

    def options(self) -> list[str]:
        """The JVM options, for ``spark.driver.extraJavaOptions``."""
        found: list[str] = []
        if self.class_archive is not None:
            if self.class_archive.is_file():
                # -Xshare:auto (the default): an archive that does not match this JVM
                # or class path is ignored, with a warning, and the run goes on.
                found.append(f"-XX:SharedArchiveFile={self.class_archive}")
            else:
                found.append(f"-XX:ArchiveClassesAtExit={_pending(self.class_archive)}")
        if self.c1_only:
            found.append("-XX:TieredStopAtLevel=1")
        return found


def class_archive() -> Path | None:
    """The AppCDS archive ``LANDER_SPARK_CDS`` names (``off``: none), by default one per
    PySpark version and Java binary in the user's cache."""
    value = os.environ.get("LANDER_SPARK_CDS", "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    return cache_dir() / f"spark-{pyspark.__version__}-{_java_id()}.jsa"


def cache_dir() -> Path:
    """Where local runs keep what they build once: the class archive, the object reader's
    jar (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``kinesis-lander``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kinesis-lander"


def _java_id() -> str:
    """The Java binary a local session starts (JAVA_HOME's, else the PATH's), hashed."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"
    real = os.path.realpath(java)
    try:
        stamp = f"{real}:{os.stat(real).st_mtime_ns}"
    except OSError:
        stamp = real
    return hashlib.sha256(stamp.encode()).hexdigest()[:12]


def _pending(archive: Path) -> Path:
    """Where this process's JVM writes a missing archive (moved in place by :func:`finish`)."""
    return archive.with_name(f"{archive.name}.{os.getpid()}.tmp")


def jvm_plan(input_bytes: int | None) -> JvmPlan:
    """The options of a job's JVM: the class archive, and C1 only for small inputs."""
    archive = class_archive()
    if archive is not None:
        archive.parent.mkdir(parents=True, exist_ok=True)
    small = input_bytes is not None and input_bytes < C1_BELOW_BYTES
    return JvmPlan(archive, c1_only=small)


_STARTED: dict[int, JvmPlan] = {}
"""Sessions :func:`get_session` started with a plan (by id): only those :func:`finish` stops."""


def finish(spark: SparkSession, plan: JvmPlan) -> None:
    """If the JVM of a session started with ``plan`` is writing the class archive: stop
    the session, wait for the JVM and move the archive in. Otherwise nothing: the
    session ends with the process, as before.

    The JVM writes the archive as it exits, after Python has let go of it: so the JVM's
    stdin is closed (it exits on end of input) and waited for, and the archive moved in
    place in one rename, so two first runs at once cannot leave a torn one.
    """
    archive = plan.class_archive
    if archive is None or archive.is_file() or _STARTED.get(id(spark)) != plan:
        return  # nothing to write, or a session someone else started (and stops)
    spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()
    process.wait(timeout=300)
    written = _pending(archive)
    if written.is_file() and written.stat().st_size > 0:
        os.replace(written, archive)


_PROPERTY = re.compile(r"([^\s=]+)\s*=?\s*(.*?)")
"""A property line: the key up to the first blank or ``=``; the rest, trimmed."""


def parse_properties(text: str) -> dict[str, str]:
    """A Spark properties file (``spark-defaults.conf``'s format): ``key value`` or
    ``key=value`` lines, blank lines and ``#`` comments ignored."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        match = _PROPERTY.fullmatch(entry)
        if match is None:
            raise ValueError(f"not a Spark property line: {raw!r}")
        found[match[1]] = match[2]
    return found


def properties_file() -> dict[str, str]:
    """The settings of the file ``LANDER_SPARK_PROPERTIES`` names (the Spark image's
    defaults), or none. Not ``SPARK_CONF_DIR``: Spark puts that folder on the JVM's class
    path, and a class path with a non-empty folder can neither write nor use an AppCDS
    archive."""
    value = os.environ.get("LANDER_SPARK_PROPERTIES", "").strip()
    if not value:
        return {}
    try:
        return parse_properties(Path(value).read_text())
    except OSError as exc:
        raise ValueError(f"LANDER_SPARK_PROPERTIES: cannot read {value}: {exc.strerror}") from None


def local_settings(cores: int | None = None, jvm: JvmPlan | None = None) -> dict[str, str]:
    """Settings for a local run: the defaults plus a shuffle sized to the cores."""
    cores = cores or os.cpu_count() or 2
    java_options = ["-XX:+UseParallelGC", *JVM_LOG_OPTIONS, *(jvm.options() if jvm else [])]
    return {
        **DEFAULTS,
        "spark.sql.shuffle.partitions": str(min(16, max(2, 2 * cores))),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # PySpark otherwise records each column function's Python call site in the JVM,
        # for errors' query context: a walk of the Python stack and four more calls into
        # the JVM per function. Off, the driver's Python took 7.5 CPU-s instead of 9.6 for
        # a typed run of the production-like day (issue 48), 6.5 instead of 7.3 untyped;
        # the jobs' errors are one line of their own. A static setting: spark-submit
        # takes it as --conf (docs/sparkjobs.md).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Throughput collector: G1's concurrent work cost a day's compaction ~20% more CPU.
        "spark.driver.extraJavaOptions": " ".join(java_options),
        "spark.driver.memory": os.environ.get("LANDER_SPARK_DRIVER_MEMORY", "2g"),
    }


def with_object_reader(jars: str) -> str:
    """``spark.jars`` (comma-separated) plus the jar of the compaction's object reader
    (:mod:`sparkjobs.compaction.objectreader`), when there is one. A reader that fails to build is
    logged and left out: the jobs then read objects as text, the same rows more slowly."""
    try:
        jar = reader_jar(cache_dir())
    except RuntimeError as exc:
        structlog.get_logger("sparkjobs.session").warning(
            "object reader not built; objects are read as text", error=str(exc)
        )
        return jars
    if jar is None:
        return jars
    return ",".join([*filter(None, (j.strip() for j in jars.split(","))), str(jar)])


def get_session(
    master: str | None = None, app: str = "kinesis-lander", jvm: JvmPlan | None = None
) -> SparkSession:
    """The active session, or a new one (local unless ``master`` or spark-submit says);
    ``jvm``: options of a local session's JVM (:func:`jvm_plan`)."""
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
        # The file's settings first: the session's own, and PYSPARK_SUBMIT_ARGS, win.
        settings = {**properties_file(), **local_settings(jvm=jvm)}
        jars = with_object_reader(settings.get("spark.jars", ""))
        if jars:
            settings["spark.jars"] = jars
        for key, value in settings.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if jvm is not None and (master or not submitted):
        _STARTED[id(spark)] = jvm
    given = spark.sparkContext.getConf()
    for key, value in DEFAULTS.items():
        if not given.contains(key):
            spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(os.environ.get("LANDER_SPARK_LOG_LEVEL", "WARN"))
    return spark
