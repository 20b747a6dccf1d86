"""The landed objects' codec: JSON Lines in gzip, defined once.

A landed object (data or dead letters) is one or more gzip members (RFC 1952) of JSON
Lines (:mod:`.envelope` says what a line holds). Everything a writer or a reader needs
of that comes from here: the key's suffix and the glob a folder reader filters by, the
magic bytes, the content type, the name table formats give the compression, and
compressing, opening and checking an object. Another codec (zstd lines, say) is a change
to this module, to the lander's fast compressors (:mod:`consumer.landing.deflate`, held
to :func:`compress` by tests) and to the reader jar's inflater (sparkjobs/compaction/jvm, held to
:func:`check_object` by tests); ``tests/test_layout.py`` keeps every other module from
spelling the format.

Is an object whole? Spark's reader, told to survive bad files, stops at the first error
in a file without saying so: a truncated object quietly yields fewer records. So when a
strict read of a window fails, every input object is checked with :func:`check_object`
(zlib in C, output discarded) and classified:

- ``ok``: one or more complete gzip members, checksums right, nothing after them.
- ``truncated``: the bytes stop before the stream ends. Every byte decoded so far is
  what was written, so its complete lines are recovered (:func:`recover_lines`).
- ``corrupt``: not gzip, bad compressed data, a checksum mismatch, or junk after the
  stream. A bit flip can change output before the decoder notices, so nothing from
  the file is trusted.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SUFFIX = ".jsonl.gz"
"""The end of every landed object's key."""
SUFFIX_PATTERN = re.escape(SUFFIX)
""":data:`SUFFIX` in a regular expression."""
GLOB = f"*{SUFFIX}"
"""A landed object's file name, as a glob (Spark's ``pathGlobFilter``, DuckDB, pathlib)."""
MAGIC = b"\x1f\x8b"
"""The first bytes of every landed object."""
CONTENT_TYPE = "application/gzip"
"""The landed objects' Content-Type."""
COMPRESSION = "gzip"
"""The compression's name in table formats (Glue's ``compressionType``, DuckDB's
``compression``)."""

Status = Literal["ok", "truncated", "corrupt"]

_CHUNK = 1 << 20
_GZIP = 16 + zlib.MAX_WBITS


@dataclass(frozen=True, slots=True)
class FileCheck:
    """What :func:`check_object` found in one object."""

    status: Status
    lines: int
    """Complete lines (newline-terminated) decoded: all of them when ``ok``."""
    reason: str = ""


def _inflate(body: bytes) -> tuple[list[bytes], Status, str]:
    """Decode every member; the output chunks, the status and why."""
    out: list[bytes] = []
    data = body
    while True:
        inflater = zlib.decompressobj(_GZIP)
        try:
            pending = data
            while pending:
                out.append(inflater.decompress(pending, _CHUNK))
                pending = inflater.unconsumed_tail
            out.append(inflater.flush())
        except zlib.error as exc:
            return out, "corrupt", f"bad gzip data: {exc}"
        if not inflater.eof:
            return out, "truncated", "gzip stream ends early"
        rest = inflater.unused_data
        if not rest:
            return out, "ok", ""
        if rest[:2] != MAGIC:
            return out, "corrupt", f"{len(rest)} bytes of junk after the gzip stream"
        data = rest


def compress(data: bytes, level: int = 1) -> bytes:
    """One gzip member holding ``data``, with no name and mtime 0: the same input and
    level always give the same bytes."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, _GZIP)
    return compressor.compress(data) + compressor.flush()


def decompress(body: bytes) -> bytes:
    """Every member's lines; raises (OSError, EOFError, zlib.error) on a damaged body."""
    return gzip.decompress(body)


def open_lines(path: Path) -> gzip.GzipFile:
    """A landed object in a folder, opened to be read line by line."""
    return gzip.open(path, "rb")


def is_compressed(body: bytes) -> bool:
    """Whether ``body`` starts as a landed object does."""
    return body[:2] == MAGIC


def check_object(body: bytes) -> FileCheck:
    """Classify one object's bytes and count its complete lines."""
    if not body:
        return FileCheck("corrupt", 0, "empty object (a landed file is at least a gzip header)")
    if not is_compressed(body):
        return FileCheck("corrupt", 0, "not gzip")
    chunks, status, reason = _inflate(body)
    lines = sum(chunk.count(b"\n") for chunk in chunks)
    if status == "corrupt":
        return FileCheck(status, lines, reason)
    last = next((chunk for chunk in reversed(chunks) if chunk), b"")
    if status == "ok" and last and not last.endswith(b"\n"):
        lines += 1  # a last line without its newline is still a line
    return FileCheck(status, lines, reason)


def recover_lines(body: bytes) -> list[str]:
    """The complete lines of a truncated object, as text (undecodable bytes replaced)."""
    chunks, _, _ = _inflate(body)
    text = b"".join(chunks)
    complete = text[: text.rfind(b"\n") + 1]
    return [line.decode("utf-8", "replace") for line in complete.splitlines() if line.strip()]
