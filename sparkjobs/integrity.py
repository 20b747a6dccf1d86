"""Is a landed object a whole gzip stream? Decided in Python, file by file.

Spark's reader, told to survive bad files, stops at the first error in a file without
saying so: a truncated object quietly yields fewer records. So when a strict read of a
window fails, every input object is checked here (zlib in C, output discarded) and
classified:

- ``ok``: one or more complete gzip members, checksums right, nothing after them.
- ``truncated``: the bytes stop before the stream ends. Every byte decoded so far is
  what was written, so its complete lines are recovered.
- ``corrupt``: not gzip, bad compressed data, a checksum mismatch, or junk after the
  stream. A bit flip can change output before the decoder notices, so nothing from
  the file is trusted.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "truncated", "corrupt"]

_CHUNK = 1 << 20
_GZIP = 16 + zlib.MAX_WBITS


@dataclass(frozen=True, slots=True)
class FileCheck:
    """What :func:`check_gzip` found in one object."""

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
        if rest[:2] != b"\x1f\x8b":
            return out, "corrupt", f"{len(rest)} bytes of junk after the gzip stream"
        data = rest


def check_gzip(body: bytes) -> FileCheck:
    """Classify one object's bytes and count its complete lines."""
    if not body:
        return FileCheck("corrupt", 0, "empty object (a landed file is at least a gzip header)")
    if body[:2] != b"\x1f\x8b":
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
