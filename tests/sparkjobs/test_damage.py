"""Which failures of the fast read mean damaged input (sparkjobs/compaction/damage.py),
on Java exceptions as Py4J hands them over, imitated: no JVM. The same with real Java
objects, through a whole run, is in test_compact.py."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JError

from sparkjobs.compaction.damage import damaged_input, describe

HIERARCHY = {
    "java.lang.Throwable": None,
    "java.lang.Exception": "java.lang.Throwable",
    "java.lang.RuntimeException": "java.lang.Exception",
    "java.lang.Error": "java.lang.Throwable",
    "java.lang.VirtualMachineError": "java.lang.Error",
    "java.lang.OutOfMemoryError": "java.lang.VirtualMachineError",
    "java.io.IOException": "java.lang.Exception",
    "java.io.EOFException": "java.io.IOException",
    "java.io.FileNotFoundException": "java.io.IOException",
    "java.net.SocketTimeoutException": "java.io.IOException",
    "java.nio.file.FileSystemException": "java.io.IOException",
    "java.nio.file.AccessDeniedException": "java.nio.file.FileSystemException",
    "java.nio.file.NoSuchFileException": "java.nio.file.FileSystemException",
    "java.util.zip.ZipException": "java.io.IOException",
    "org.apache.spark.SparkException": "java.lang.Exception",
    "org.apache.spark.sql.AnalysisException": "java.lang.Exception",
}


class FakeClass:
    def __init__(self, name: str) -> None:
        self.name = name

    def getName(self) -> str:  # noqa: N802 - Java's name
        return self.name

    def getSuperclass(self) -> FakeClass | None:  # noqa: N802
        parent = HIERARCHY[self.name]
        return FakeClass(parent) if parent else None


class FakeThrowable:
    """A Java throwable as Py4J shows it: getClass, getMessage, getCause."""

    def __init__(self, name: str, message: str | None, cause: FakeThrowable | None = None):
        self.name, self.message, self.cause = name, message, cause

    def getClass(self) -> FakeClass:  # noqa: N802
        return FakeClass(self.name)

    def getMessage(self) -> str | None:  # noqa: N802
        return self.message

    def getCause(self) -> FakeThrowable | None:  # noqa: N802
        return self.cause


class JavaFailureError(Exception):
    """Py4JJavaError's shape (its str needs a gateway): the throwable as java_exception."""

    def __init__(self, throwable: Any) -> None:
        super().__init__("An error occurred while calling o942.parquet.")
        self.java_exception = throwable


class CapturedError(Exception):
    """A pyspark.errors exception converted from a Java one: the throwable as _origin."""

    def __init__(self, throwable: Any) -> None:
        super().__init__("[FAILED_READ_FILE.NO_HINT] Encountered error while reading file")
        self._origin = throwable


def _spark(name: str, message: str | None) -> FakeThrowable:
    """``name(message)`` as a task's failure reaches the driver: inside a SparkException."""
    uri = "file:///archive/stream=orders/dt=2026-11-21/hour=09/o.jsonl.gz"
    inner = FakeThrowable(name, message)
    return FakeThrowable("org.apache.spark.SparkException", f"Job aborted: {uri}", inner)


URI = "file:///archive/stream=orders/dt=2026-11-21/hour=09/minute=03/shard=s/a-b.jsonl.gz"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("java.io.IOException", f"{URI}: gzip stream ends early"),  # the reader jar
        ("java.io.IOException", f"{URI}: bad gzip data: CRC-32 mismatch"),
        ("java.io.IOException", f"{URI}: 12 bytes of junk after the gzip stream"),
        ("java.io.IOException", f"{URI}: shorter than the 2048 bytes listed"),  # resized
        ("java.io.IOException", "not a gzip file"),  # Hadoop's decompressor
        ("java.io.IOException", "gzip stream CRC failure"),
        ("java.io.IOException", "invalid code lengths set"),  # zlib's inflate
        ("java.io.IOException", "invalid distance too far back"),
        ("java.io.EOFException", "Unexpected end of input stream"),
        ("java.util.zip.ZipException", "Not in GZIP format"),
        ("java.nio.file.NoSuchFileException", "/archive/gone.jsonl.gz"),  # gone since listed
        ("java.io.FileNotFoundException", "File file:/archive/gone.jsonl.gz does not exist"),
    ],
)
def test_damaged_or_changed_input_is_read_again(name: str, message: str) -> None:
    assert damaged_input(JavaFailureError(_spark(name, message)))
    assert damaged_input(CapturedError(_spark(name, message)))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("java.lang.OutOfMemoryError", "Java heap space"),
        ("java.nio.file.AccessDeniedException", f"{URI}: getFileStatus: 403 Forbidden"),
        ("java.io.FileNotFoundException", "/archive/o.jsonl.gz (Permission denied)"),
        ("java.io.IOException", "No space left on device"),
        ("java.net.SocketTimeoutException", "Read timed out"),
        ("org.apache.spark.sql.AnalysisException", "[UNRESOLVED_COLUMN] data"),
        ("java.lang.RuntimeException", "not gzip"),  # a damage message, not an IOException
    ],
)
def test_a_failure_that_is_not_the_input_is_not_read_again(name: str, message: str) -> None:
    """Out of memory, S3 refusing access, a full disk, a timeout, a bug in the plan:
    none of these is damaged input, whatever an IOException around them says."""
    assert not damaged_input(JavaFailureError(_spark(name, message)))
    assert not damaged_input(CapturedError(_spark(name, message)))


def test_a_jvm_error_or_refusal_anywhere_in_the_chain_wins() -> None:
    """An IOException that wraps an out-of-memory error or an access refusal says
    nothing about the input."""
    for inner in (
        FakeThrowable("java.lang.OutOfMemoryError", "Java heap space"),
        FakeThrowable("java.nio.file.AccessDeniedException", "s3a://b/k"),
    ):
        wrapped = FakeThrowable("java.io.IOException", f"{URI}: not a gzip file", inner)
        assert not damaged_input(JavaFailureError(wrapped))


def test_python_failures_and_a_gone_jvm_are_not_the_input() -> None:
    assert not damaged_input(RuntimeError("gzip stream ends early"))
    assert not damaged_input(KeyError("payload"))

    class Dead:
        def getClass(self) -> Any:  # noqa: N802
            raise Py4JError("An error occurred while trying to connect to the Java server")

    assert not damaged_input(JavaFailureError(Dead()))
    assert describe(JavaFailureError(Dead())).startswith("JavaFailureError: An error occurred")


def test_a_python_exception_raised_from_a_damaged_read_is_one() -> None:
    """What the read raised is looked for through the Python exception's causes too."""
    outer = RuntimeError("writing the hour failed")
    outer.__cause__ = JavaFailureError(
        _spark("java.io.EOFException", "Unexpected end of input stream")
    )
    assert damaged_input(outer)


def test_describe_names_the_innermost_java_cause_in_one_line() -> None:
    failure = JavaFailureError(_spark("java.lang.OutOfMemoryError", "Java heap space"))
    assert describe(failure) == "java.lang.OutOfMemoryError: Java heap space"
    assert describe(ValueError("two\n  lines")) == "ValueError: two lines"
    assert len(describe(ValueError("x" * 1000))) == 300
