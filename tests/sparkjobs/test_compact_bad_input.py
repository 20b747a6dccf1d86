"""`lander compact` on a window with a truncated and a bit-flipped object, end to end.

What a scheduler and an operator see: exit 4 (0 with --allow-bad-input), each bad
file named on stdout, every readable record in the table (checked against what
bench/archives.py landed, with DuckDB), no Java stack trace on stderr for the damage
the job handles, and stdout holding the job's result lines only, even when the JVM has
a class archive to complain about. The process test runs the command as a scheduler
does, in a fresh process and JVM; the other runs it in the tests' shared session.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench import archives
from bench.archives import Truth, generate_archive
from consumer import cli
from consumer.archive.layout import parse_relative
from sparkjobs.compaction.quiet import quieted
from tests.sparkjobs.test_compact import STREAM, _assert_exactly_the_truth

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[2]
DAY = "2026-11-21"
RESULT = re.compile(rf"^{STREAM} {DAY}: published; .*; bad input (\d+); run \S+$")
JAVA_FRAME = re.compile(r"^\s+at [\w$.]+\(", re.MULTILINE)
"""A line of a Java stack trace (``\tat org.apache.spark….run(Executor.scala:620)``)."""
JVM_LOG = re.compile(r"^\[\d+\.\d+s\]\[\w+\s*\]", re.MULTILINE)
"""A line of the JVM's own log (``[0.027s][warning][cds,dynamic] …``)."""


def _damaged_day(archive: Path) -> tuple[Truth, Path, Path]:
    """An hour of two shards; its largest object truncated, the next one bit-flipped."""
    truth = generate_archive(
        archive, stream=STREAM, day=date(2026, 11, 21), hours=[9], shards=2,
        records_per_minute=10, records_per_file=40, transport_duplicate_share=0.1, seed=11,
    )  # fmt: skip
    plain = sorted(truth.files, key=lambda f: f.stat().st_size, reverse=True)
    archives.truncate(truth, plain[0], 0.6)
    archives.corrupt(truth, plain[1])
    return truth, plain[0], plain[1]


def _rel(path: Path) -> str:
    """The object's key below its stream, as the job names it."""
    where = parse_relative(path.as_posix())
    assert where is not None
    return where.rel


def _bad_lines(out: str) -> dict[str, str]:
    """The ``  bad input: FILE: KIND, …`` lines: file -> kind."""
    found = re.findall(r"^  bad input: (\S+): (\w+), \d+ lines \(.*\)$", out, re.MULTILINE)
    return dict(found)


def _argv(archive: Path, output: Path, *extra: str) -> list[str]:
    return ["compact", "--stream", STREAM, "--archive", archive.as_uri(), "--compacted",
            output.as_uri(), "--window", DAY, *extra]  # fmt: skip


def _mismatched_class_archive(folder: Path) -> Path:
    """A class archive the JVM cannot use for Spark: written by a JVM whose class path
    was Spark's launcher jar alone. A JVM started with it says so, on its own log."""
    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert java, "no java"
    (launcher,) = (Path(pyspark.__file__).parent / "jars").glob("spark-launcher_*.jar")
    archive = folder / "other.jsa"
    main = "org.apache.spark.launcher.Main"  # exits at once, refusing no arguments
    argv = [java, f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(launcher), main]
    subprocess.run(argv, capture_output=True, timeout=120, check=False)
    assert archive.is_file(), "the JVM wrote no class archive"
    return archive


@pytest.mark.deep  # a fresh JVM for one window: about 30 s on 2 cores
@pytest.mark.processes
def test_bad_input_exits_4_names_the_files_keeps_every_readable_row_and_prints_no_trace(
    tmp_path: Path,
) -> None:
    archive, output = tmp_path / "archive", tmp_path / "out"
    truth, truncated, corrupt = _damaged_day(archive)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    env |= {
        "LANDER_SPARK_CDS": str(_mismatched_class_archive(tmp_path)),
        "LANDER_SPARK_MASTER": "local[1]",
        "LANDER_LOG_FORMAT": "console",
    }
    done = subprocess.run(
        [sys.executable, "-m", "consumer.cli", *_argv(archive, output)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr[-3000:]

    # stdout: the result line and one line per bad file, nothing else.
    (result, *rest) = done.stdout.splitlines()
    found = RESULT.match(result)
    assert found, result
    assert found[1] == "2"
    assert _bad_lines(done.stdout) == {_rel(truncated): "truncated", _rel(corrupt): "corrupt"}
    assert len(rest) == 2, done.stdout
    assert not JVM_LOG.search(done.stdout)
    # The JVM did complain about the class archive: on stderr, where its log goes now.
    assert re.search(r"\]\[warning\]\[cds", done.stderr), done.stderr[-3000:]

    # stderr: the exit code's one line, the damage in one warning, no stack trace.
    assert f"lander compact: {STREAM} {DAY}: 2 bad input file(s), listed on stdout" in done.stderr
    assert "damaged input; checking every input object" in done.stderr
    for trace in ("Traceback", "FAILED_EXECUTE_UDF", "aborting job", "Aborting job"):
        assert trace not in done.stderr, done.stderr[-3000:]
    assert not JAVA_FRAME.search(done.stderr), done.stderr[-3000:]

    # Nothing readable is lost: the table holds exactly what a correct compaction keeps.
    _assert_exactly_the_truth(output, truth)


def test_with_allow_bad_input_the_window_exits_0_and_keeps_every_readable_row(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same window through the command in this process (the shared session)."""
    archive, output = tmp_path / "archive", tmp_path / "out"
    truth, truncated, corrupt = _damaged_day(archive)
    for key in [k for k in os.environ if k.startswith("LANDER_") and k != "LANDER_SPARK_CDS"]:
        monkeypatch.delenv(key)
    monkeypatch.setattr("sparkjobs.cli.configure_logging", lambda *_, **__: None)
    assert cli.main(_argv(archive, output, "--allow-bad-input")) == 0
    out, err = capsys.readouterr()
    assert _bad_lines(out) == {_rel(truncated): "truncated", _rel(corrupt): "corrupt"}
    assert "bad input file(s)" not in err
    _assert_exactly_the_truth(output, truth)


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
