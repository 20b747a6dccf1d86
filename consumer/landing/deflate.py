"""Fast deflate for landed objects, and the digest that says two objects hold the same lines.

Landed objects are gzip members with no name and mtime 0 (:mod:`consumer.archive.codec`
defines the format; tests hold these compressors to its :func:`compress`). Which library
deflates them is a setting (``LANDER_GZIP_CODEC``): ``zlib`` (the standard library) or
``isal`` (ISA-L's igzip, from the ``isal`` wheel: several times faster at level 1, and
somewhat smaller). Readers see ordinary gzip either way.

The bytes differ between codecs and levels, and isal's also depend on where the input
is split into compress calls. So whether a put that finds its key taken is a replay
(the same lines: success) or a conflict is decided on the **content digest**, the
SHA-256 of the uncompressed lines, which the lander records in each object's metadata
(``content-sha256``), never on the bytes of the body. Objects landed before that
digest existed carry only the body's digest; :func:`content_digest` reads them.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from typing import Literal, Protocol

from consumer.archive import codec

CodecName = Literal["zlib", "isal"]
CONTENT_DIGEST = "content-sha256"
"""The object metadata key of the SHA-256 of the uncompressed content."""
ISAL_LEVELS = (1, 2)
"""isal's levels that are real compression levels (its 0 still compresses, and 3 is no
smaller than 2 on JSON lines): zlib levels map onto them."""


class Compressor(Protocol):
    """A streaming compressor, as ``zlib.compressobj`` returns."""

    def compress(self, data: bytes, /) -> bytes:
        """Compress a piece."""

    def flush(self, mode: int = ..., /) -> bytes:
        """End the stream."""


def _isal() -> Callable[[int], Compressor] | None:
    try:
        from isal import isal_zlib  # noqa: PLC0415 - optional wheel
    except ImportError:
        return None

    def make(level: int) -> Compressor:
        isal_level = ISAL_LEVELS[0] if level <= 1 else ISAL_LEVELS[-1]
        return isal_zlib.compressobj(isal_level, isal_zlib.DEFLATED, 31)

    return make


def _zlib(level: int) -> Compressor:
    # wbits 31: a gzip header with no name and mtime 0 (as codec.compress), so the same input and
    # settings always give the same bytes.
    return zlib.compressobj(level, zlib.DEFLATED, 31)


_ISAL = _isal()


def available() -> tuple[CodecName, ...]:
    """The codecs this process can use."""
    return ("zlib", "isal") if _ISAL is not None else ("zlib",)


def resolve(setting: str) -> CodecName:
    """``LANDER_GZIP_CODEC``: ``auto`` is isal when its wheel is installed (faster on
    the landing path and smaller files, docs/benchmarks.md, hotpath), else zlib."""
    if setting == "auto":
        return "isal" if _ISAL is not None else "zlib"
    return "isal" if setting == "isal" else "zlib"


def gzip_stream(level: int = 1, codec: CodecName = "zlib") -> Compressor:
    """A gzip compressor whose output depends only on its input (and, for isal, on how
    the input is split) and settings."""
    if codec == "isal":
        if _ISAL is None:
            raise ValueError("the isal codec needs the isal wheel (pip install isal)")
        return _ISAL(level)
    return _zlib(level)


def gzip_bytes(data: bytes, level: int = 1, codec: CodecName = "zlib") -> bytes:
    """One gzip member holding ``data``."""
    compressor = gzip_stream(level, codec)
    return compressor.compress(data) + compressor.flush()


def sha256(data: bytes) -> str:
    """Hex SHA-256, as stored in object metadata."""
    return hashlib.sha256(data).hexdigest()


def content_digest(body: bytes) -> str:
    """The SHA-256 of what a stored body holds: its uncompressed lines for gzip, the
    bytes themselves otherwise (the probe object, a damaged body)."""
    if codec.is_compressed(body):
        try:
            return sha256(codec.decompress(body))
        except (OSError, EOFError, zlib.error):
            pass  # truncated or damaged: only the very same bytes are the same object
    return sha256(body)
