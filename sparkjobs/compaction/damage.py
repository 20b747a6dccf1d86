"""Which failures of the compaction's fast read mean damaged input, and what failed.

The fast read trusts the gzip streams (:mod:`sparkjobs.compaction.compact`): a damaged
object fails it, and only then is every object checked and the window read again
(:mod:`sparkjobs.compaction.fallback`). That second read is for the input's faults
alone. Anything else (the JVM out of memory, S3 refusing access, a network that is
down, a bug) would fail it again or, worse, be reported as bad input: it fails the
window at once, with one line that says what failed (:func:`describe`).

Spark reports a failed read as a Py4J error (``Py4JJavaError``, or a
``pyspark.errors`` exception holding one) whose Java cause chain ends in what the reader
threw. Damaged input is, somewhere in that chain:

- a truncated or corrupt gzip stream: ``java.io.EOFException``,
  ``java.util.zip.ZipException`` or ``DataFormatException``, or a plain
  ``java.io.IOException`` with the message of a gzip check (the reader jar's own,
  :data:`DAMAGE`, Hadoop's gzip decompressor's, zlib's);
- an object gone or resized since the listing (the checked read lists the folders
  again): ``java.io.FileNotFoundException``, ``java.nio.file.NoSuchFileException``, or
  the reader jar's "shorter/longer than the N bytes listed".

A chain that holds a JVM error (``java.lang.VirtualMachineError``: out of memory, a
stack overflow) or an access refusal (:data:`NOT_INPUT`) is never damaged input, even
if an IOException wraps it. Python exceptions (a bug, a dead gateway) never are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from py4j.protocol import Py4JError

DAMAGED_CLASSES = frozenset(
    {
        "java.io.EOFException",
        "java.util.zip.ZipException",
        "java.util.zip.DataFormatException",
        "java.io.FileNotFoundException",
        "java.nio.file.NoSuchFileException",
    }
)
"""Java exceptions (or their subclasses) that say the input is damaged or gone."""

NOT_INPUT = frozenset(
    {
        "java.lang.VirtualMachineError",
        "java.nio.file.AccessDeniedException",
        "org.apache.hadoop.security.AccessControlException",
    }
)
"""Java exceptions (or their subclasses) that say the failure is not the input's: a
chain holding one is never damaged input (S3A reports a 403 as an AccessDeniedException,
an IOException; a local file without read permission is a FileNotFoundException that
says "Permission denied")."""

_DENIED = re.compile(r"permission denied|access denied|forbidden", re.IGNORECASE)

DAMAGE = re.compile(
    r"(?:^|: )(?:"
    # the reader jar (sparkjobs/compaction/jvm/LandedObjectLines.java)
    r"empty object|\d+ bytes of junk after the gzip stream|gzip stream ends early"
    r"|bad gzip data|not gzip|(?:shorter|longer) than the \d+ bytes listed"
    # Hadoop's gzip decompressor (Spark's text reader)
    r"|not a gzip file|gzip (?:header|stream) CRC failure"
    r"|stored gzip size doesn't match decompressed size"
    r"|gzip data not compressed with deflate method|unknown gzip format"
    r"|Unexpected end of input stream"
    # zlib's inflate, through java.util.zip.Inflater
    r"|invalid (?:block type|stored block lengths|code lengths set|bit length repeat"
    r"|code -- missing end-of-block|literal/lengths set|distances set|literal/length code"
    r"|distance code|distance too far back|window size)"
    r"|incorrect (?:header|data|length) check|too many length or distance symbols"
    r"|unknown (?:compression method|header flags set)|header crc mismatch"
    r")"
)
"""Messages of a plain ``java.io.IOException`` that report a damaged gzip stream, or an
object that changed since the listing (after the object's URI and ``: `` when the
reader jar names it)."""


def _java_chain(exc: BaseException) -> Iterator[Any]:
    """The Java throwable a Python exception carries, then its causes; none for a
    Python exception of Python's own."""
    # Py4JJavaError holds it as java_exception; pyspark.errors' captured exceptions,
    # converted from one, as _origin (PySpark has no public name for it).
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    for _ in range(32):  # a cause chain that loops on itself ends here
        if throwable is None:
            return
        yield throwable
        throwable = throwable.getCause()


def _throwables(exc: BaseException) -> Iterator[Any]:
    """The Java throwables behind ``exc`` and behind the exceptions it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield from _java_chain(current)
        current = current.__cause__ or current.__context__


def _class_names(throwable: Any) -> list[str]:
    """The throwable's class and its superclasses, most specific first."""
    names = []
    cls = throwable.getClass()
    while cls is not None:
        names.append(str(cls.getName()))
        cls = cls.getSuperclass()
    return names


def _damaged(names: list[str], message: str) -> bool:
    if not DAMAGED_CLASSES.isdisjoint(names):
        return not _DENIED.search(message)
    return names[0] == "java.io.IOException" and DAMAGE.search(message) is not None


def damaged_input(exc: BaseException) -> bool:
    """Whether ``exc``, a failure of the fast read, says the input is damaged or changed
    since the listing (and so the objects are to be checked and read again)."""
    found = False
    try:
        for throwable in _throwables(exc):
            names = _class_names(throwable)
            if not NOT_INPUT.isdisjoint(names):
                return False
            found = found or _damaged(names, str(throwable.getMessage() or ""))
    except Py4JError:
        return False  # the JVM is gone: whatever failed, it was not the input
    return found


def describe(exc: BaseException) -> str:
    """What failed, in one line: the innermost Java cause (class and message) of a
    Spark failure, else the exception's type and message; at most 300 characters."""
    text = None
    try:
        for throwable in _java_chain(exc):
            text = f"{throwable.getClass().getName()}: {throwable.getMessage() or ''}"
    except Py4JError:
        text = None  # the JVM is gone: the Python side's own words
    if text is None:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]
