"""The JVM options of `lander compact`: an AppCDS archive, and C1 only for small inputs.

The options are pure (:class:`sparkjobs.session.JvmPlan`); one process test runs
`lander compact` twice on its own archive folder: the first run writes the class
archive as its JVM exits, and it is moved in place; the second starts from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkjobs.session import (
    C1_BELOW_BYTES,
    JvmPlan,
    class_archive,
    jvm_plan,
    local_settings,
    parse_properties,
    properties_file,
)
from tests.support.landed import STREAM, line, write_object

REPO = Path(__file__).resolve().parents[2]


def test_a_missing_archive_is_written_at_exit_and_an_existing_one_is_used(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "spark.jsa"
    (option,) = JvmPlan(archive).options()
    assert option == f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp"
    archive.write_bytes(b"x")
    assert JvmPlan(archive).options() == [f"-XX:SharedArchiveFile={archive}"]
    assert JvmPlan(None, c1_only=True).options() == ["-XX:TieredStopAtLevel=1"]


def test_the_jvms_own_warnings_go_to_stderr_never_to_stdout() -> None:
    """Unified logging writes warnings to stdout by default (a class archive that does
    not match: ``[warning][cds,dynamic] Unable to use shared archive``); a local session
    turns that output off and logs warnings and errors to stderr. (The end-to-end check,
    a mismatched archive in a real run, is in test_compact_bad_input.py.)"""
    options = local_settings(2, JvmPlan(Path("/x.jsa"), c1_only=True))
    java = options["spark.driver.extraJavaOptions"].split()
    assert java[1:3] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]
    assert java[3:] == JvmPlan(Path("/x.jsa"), c1_only=True).options()


def test_c1_only_below_the_measured_crossover_and_when_the_size_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANDER_SPARK_CDS", "off")
    assert jvm_plan(21 << 20) == JvmPlan(None, c1_only=True)
    assert jvm_plan(C1_BELOW_BYTES) == JvmPlan(None, c1_only=False)
    assert jvm_plan(None) == JvmPlan(None, c1_only=False)  # an s3a:// archive, not listed


def test_the_default_archive_is_per_pyspark_and_java_in_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pyspark

    monkeypatch.delenv("LANDER_SPARK_CDS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    found = class_archive()
    assert found is not None
    assert found.parent == tmp_path / "kinesis-lander"
    assert found.name.startswith(f"spark-{pyspark.__version__}-")
    monkeypatch.setenv("LANDER_SPARK_CDS", "OFF")
    assert class_archive() is None


@pytest.mark.deep  # ~64 s: two JVMs, one of them writing the AppCDS archive
@pytest.mark.processes
def test_the_image_script_writes_the_archive_and_lander_compact_then_uses_it(
    tmp_path: Path,
) -> None:
    """deploy/docker/class_archive.py (run by the Spark image's build) writes it, with no
    temporary file left; a later `lander compact` starts from it and leaves it alone."""
    archive = tmp_path / "cds" / "spark.jsa"
    archive.parent.mkdir()
    script = REPO / "deploy" / "docker" / "class_archive.py"
    built = subprocess.run(
        [sys.executable, str(script), str(archive)], cwd=REPO, timeout=600, check=False
    )
    assert built.returncode == 0
    assert archive.stat().st_size > 1 << 20
    assert sorted(p.name for p in archive.parent.iterdir()) == ["spark.jsa"]
    written = archive.stat().st_mtime_ns

    data = tmp_path / "archive"
    lines = [
        line("shardId-000000000000", n, f"2026-11-21T10:00:0{n}.000Z", f"e{n}", b"%d" % n)
        for n in (1, 2, 3)
    ]
    write_object(data, "2026-11-21T10:00", "shardId-000000000000", lines)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    env |= {"LANDER_SPARK_CDS": str(archive), "LANDER_SPARK_MASTER": "local[1]"}
    # As in the image: its Spark defaults come from a properties file, and the archive
    # written without it still serves (the file adds settings, not class path entries).
    env["LANDER_SPARK_PROPERTIES"] = str(REPO / "deploy" / "docker" / "spark-defaults.conf")
    argv = ["compact", "--stream", STREAM, "--archive", f"file://{data}", "--window"]
    argv += ["2026-11-21T10", "--compacted", f"file://{tmp_path / 'out'}"]
    done = subprocess.run(
        [sys.executable, "-m", "consumer.cli", *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2026-11-21T10: published" in done.stdout
    assert archive.stat().st_mtime_ns == written


def test_a_properties_file_is_read_as_spark_reads_spark_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "# comment\n\nspark.a   1\nspark.b=two words \n  spark.c\t x=y\n"
    assert parse_properties(text) == {"spark.a": "1", "spark.b": "two words", "spark.c": "x=y"}
    with pytest.raises(ValueError, match="not a Spark property line"):
        parse_properties("=x")
    monkeypatch.delenv("LANDER_SPARK_PROPERTIES", raising=False)
    assert properties_file() == {}
    conf = tmp_path / "spark.conf"
    conf.write_text(text)
    monkeypatch.setenv("LANDER_SPARK_PROPERTIES", str(conf))
    assert properties_file()["spark.b"] == "two words"
    monkeypatch.setenv("LANDER_SPARK_PROPERTIES", str(tmp_path / "absent.conf"))
    with pytest.raises(ValueError, match=r"LANDER_SPARK_PROPERTIES: cannot read .*absent\.conf"):
        properties_file()


def test_the_image_defaults_parse_and_set_no_class_path() -> None:
    """The Spark image's file: S3A's credential chain, and nothing that changes the JVM's
    class path (an AppCDS archive must match it)."""
    found = parse_properties((REPO / "deploy" / "docker" / "spark-defaults.conf").read_text())
    assert found["spark.hadoop.fs.s3a.aws.credentials.provider"].startswith("software.amazon")
    assert not [k for k in found if "classpath" in k.lower() or k == "spark.jars"]
