"""The compaction's fast read: landed objects as whole files, split into lines in the JVM.

Spark's text reader pays about 0.7 ms per file before it reads a byte (each file's
reader copies the job's 1,100-key Hadoop configuration and scans it again), and a day is
~8,800 small objects. So when it can, the compaction reads objects with Spark's
``binaryFile`` source and a small Java function
(``sparkjobs/compaction/jvm/LandedObjectLines.java``) that inflates each object and
splits it into lines: the same lines, bytes untouched, with every gzip member's CRC-32
and length checked (docs/benchmarks.md has what it saves).

Where the function's jar comes from (:func:`reader_jar`): ``LANDER_SPARK_READER_JAR``
names a jar, or ``off`` (the text reader, always); unset, a jar built once from the
source with ``javac`` into the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``), named
by the source's and PySpark's hash, like the class archive. With no ``javac`` (a JRE
only) there is no jar and the text reader is used, which reads the same rows more
slowly. Under ``spark-submit`` the jar is the cluster's to ship (``--jars``);
:func:`enable` finds out whether the session can load the class.

Objects larger than :data:`WHOLE_OBJECT_MAX_BYTES` are read by the text reader, which
streams: the fast read holds an object's bytes and lines in memory at once.

A run's first read goes further (:func:`listed_objects`): the objects come from the
run's own listing, by path, and :data:`BY_PATH` reads each one, so Spark lists no folder
again (about 2 CPU-s a day here, and one LIST per minute folder on S3). It reads with
the Hadoop settings the job was started with (``spark.hadoop.*``); a ``file://`` object
straight from the filesystem, past Hadoop's local filesystem, whose stat and ``.crc``
lookup per open cost about as much as the inflate. Damage there, or an object gone or
resized since the listing, fails the fast path as damage does
(:mod:`sparkjobs.compaction.damage`), and the checked read that follows lists the
folders, as before.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark
from pyspark.errors import AnalysisException
from pyspark.sql import functions as sf
from pyspark.sql.types import ArrayType, BinaryType, DataType, StructField, StructType

from consumer.archive.envelope import DATA
from consumer.config import ConfigError
from sparkjobs.compaction.plan import hour_label_of
from sparkjobs.io import join
from sparkjobs.table.schema import CORRUPT, LANDED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkjobs.table.publish import InputFile

CLASS = "kinesislander.spark.LandedObjectLines"
FUNCTION = "lander_object_lines"
BY_PATH_CLASS = f"{CLASS}$FromPath"
BY_PATH = "lander_listed_object_lines"
"""(URI, listed size) -> the object's lines, read by the function itself."""
HEADER_CLASS = f"{CLASS}$Header"
HEADER = "lander_line_header"
"""A line (bytes) -> its header fields and payload (:data:`HEADER_TYPE`) if the line is
in exactly the lander's form, else null (:func:`sparkjobs.compaction.lines.parse`)."""
HEADER_TYPE = StructType(
    [f for f in LANDED.fields if f.name not in {DATA, CORRUPT}]
    + [StructField("payload", BinaryType())]
)
"""The landed header fields in line order (the function returns them in that order),
then the payload's bytes."""
SOURCE = Path(__file__).with_name("jvm") / "LandedObjectLines.java"
SOURCES = sorted(SOURCE.parent.glob("*.java"))
"""Every class of the jar: the reader's, and the typed payload's
(:mod:`sparkjobs.compaction.typedjvm`)."""
ENV = "LANDER_SPARK_READER_JAR"
WHOLE, TEXT = "objects", "text"
"""How a run read its objects (the manifest's ``reader``): whole, or by the text reader."""

TASK_OBJECTS = 256
"""Objects one read task takes at most (opening one costs about what reading 256 KiB
does, Spark's ``openCostInBytes`` here: 256 of them are a 64 MiB split)."""
TASK_BYTES = 64 << 20
"""Landed bytes one read task takes at most (``maxPartitionBytes`` here)."""

WHOLE_OBJECT_MAX_BYTES = 16 << 20
"""Landed gzip bytes of one object above which a run uses the streaming text reader (the
lander writes at most 64 MiB of lines per object by default: a few MiB of gzip)."""


class ReaderJarError(ConfigError, ValueError):
    """``LANDER_SPARK_READER_JAR`` names no jar (exit 2: the job checks
    :func:`setting_problem` before Spark starts). Still a ValueError, as it always was:
    not the RuntimeError of a jar that fails to build, which a session logs and goes
    on without."""

    retriable = False


def setting_problem() -> str | None:
    """What is wrong with ``LANDER_SPARK_READER_JAR``, in one line; None if nothing."""
    value = os.environ.get("LANDER_SPARK_READER_JAR", "").strip()
    if value and value.lower() != "off" and not Path(value).is_file():
        return f"{ENV}: no such file: {value} (a jar, or off for Spark's text reader)"
    return None


def reader_jar(cache: Path) -> Path | None:
    """The jar of the fast reader, built into ``cache`` if missing (unless
    ``LANDER_SPARK_READER_JAR`` names one); None for the text reader."""
    problem = setting_problem()
    if problem:
        raise ReaderJarError(problem)
    value = os.environ.get("LANDER_SPARK_READER_JAR", "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    if not SOURCE.is_file():  # run from a zip (spark-submit --py-files): no source here
        return None
    jar = cache / f"object-reader-{_fingerprint()}.jar"
    if jar.is_file():
        return jar
    return build(jar)


def _fingerprint() -> str:
    """The sources' bytes and the PySpark they compile against, hashed."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    digest.update(pyspark.__version__.encode())
    return digest.hexdigest()[:12]


def javac() -> str | None:
    """The Java compiler: JAVA_HOME's, else the PATH's; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def build(jar: Path) -> Path | None:
    """Compile :data:`SOURCES` against PySpark's jars into ``jar`` (written whole, by one
    rename); None when there is no ``javac``. A failing compiler raises."""
    compiler = javac()
    if compiler is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lander-reader-", dir=jar.parent) as work:
        classes = Path(work) / "classes"
        compile_ = [compiler, "--release", "17", "-nowarn", "-cp", f"{jars}/*"]
        _run([*compile_, "-d", str(classes), *map(str, SOURCES)])
        built = Path(work) / jar.name
        _run([str(Path(compiler).with_name("jar")), "cf", str(built), "-C", str(classes), "."])
        os.replace(built, jar)
    return jar


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed: {done.stderr.strip()[-1000:]}")


def enable(spark: SparkSession) -> bool:
    """Register :data:`FUNCTION` in ``spark`` if its class can be loaded; whether it is."""
    return _register(spark, FUNCTION, CLASS)


def enable_by_path(spark: SparkSession) -> bool:
    """Register :data:`BY_PATH` if its class can be loaded (a jar named by
    ``LANDER_SPARK_READER_JAR`` may predate it); whether it is."""
    return _register(spark, BY_PATH, BY_PATH_CLASS)


def enable_header(spark: SparkSession) -> bool:
    """Register :data:`HEADER` if its class can be loaded; whether it is."""
    return _register(spark, HEADER, HEADER_CLASS, HEADER_TYPE)


def _register(
    spark: SparkSession,
    name: str,
    java_class: str,
    returns: DataType = ArrayType(BinaryType()),  # noqa: B008 - immutable
) -> bool:
    try:
        spark.udf.registerJavaFunction(name, java_class, returns)
    except AnalysisException:
        return False
    return True


def read_tasks(files: Sequence[InputFile], parallelism: int) -> int:
    """How many tasks read ``files``: a task per core at least, and none with more than
    :data:`TASK_OBJECTS` objects or :data:`TASK_BYTES` bytes (about what Spark's file
    sources make of a day under this job's settings)."""
    by_bytes = math.ceil(sum(f.size for f in files) / TASK_BYTES)
    return max(1, parallelism, math.ceil(len(files) / TASK_OBJECTS), by_bytes)


def literal_rows(
    spark: SparkSession, rows: Iterable[Sequence[str]], names: Sequence[str]
) -> DataFrame:
    """``rows`` as a DataFrame of string columns ``names``, built in the JVM from one
    literal (split on newlines, then tabs).

    ``createDataFrame`` of a Python list would start a Python worker to unpickle it,
    about 1.7 CPU-s on a clean run that needs Python for nothing else. The values hold
    no tab or newline (archive keys and labels are digits, letters and ``=-./:``).
    """
    text = "\n".join("\t".join(row) for row in rows)
    fields = sf.split(sf.col("entry"), "\t")
    return (
        spark.range(1)
        .select(sf.explode(sf.split(sf.lit(text), "\n")).alias("entry"))
        .select(*(fields[i].alias(name) for i, name in enumerate(names)))
    )


def listed_objects(spark: SparkSession, source: str, files: Sequence[InputFile]) -> DataFrame:
    """``line`` (binary), ``rel``, ``landed_ts`` and ``label`` (its hour) of every line
    of ``files`` (listed under ``source``), read by :data:`BY_PATH`.

    The list is one literal (:func:`literal_rows`), spread round-robin over
    :func:`read_tasks` tasks. (Spark deals the rows out in its own hash order, not the
    literal's, so each task gets a like share of objects and, on average, of bytes.)
    """
    partitions = read_tasks(files, spark.sparkContext.defaultParallelism)
    rows = (
        (join(source, f.rel), str(f.size), f.rel, str(f.modified_ms), hour_label_of(f.rel))
        for f in sorted(files, key=lambda f: f.rel)
    )
    listed = (
        literal_rows(spark, rows, ("uri", "size", "rel", "modified_ms", "label"))
        .repartition(partitions)
        .select(
            "uri",
            sf.col("size").cast("long").alias("size"),
            "rel",
            sf.timestamp_millis(sf.col("modified_ms").cast("long")).alias("landed_ts"),
            "label",
        )
    )
    return listed.select(
        sf.explode(sf.call_function(BY_PATH, "uri", "size")).alias("line"),
        "rel",
        "landed_ts",
        "label",
    )
