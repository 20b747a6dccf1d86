"""The archive on a local or mounted filesystem (``file://``).

Create-if-absent is ``link(temporary, final)``: the link fails if the final name
exists, and the file it makes is already complete and fsynced, so a reader sees a
whole file or none, and nothing is ever overwritten. Blocking calls run in a thread.
"""

from __future__ import annotations

import asyncio
import errno
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from consumer.landing.objects import ObjectStoreError, PutOutcome, same_content

_TEMP = ".tmp-"
# Errors a moment later may not repeat (a busy or interrupted call, a network mount).
_RETRIABLE = {errno.EINTR, errno.EAGAIN, errno.EBUSY, errno.ETIMEDOUT, errno.EIO}


class FileObjectStore:
    """Objects as files under a root folder; keys are relative paths."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key escapes the archive: {key!r}")
        return path

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        """Write whole-or-nothing, never over an existing file."""
        try:
            return await asyncio.to_thread(self._put, key, body, metadata)
        except OSError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: OSError) -> ObjectStoreError:
        reason = exc.strerror or type(exc).__name__
        where = exc.filename or self.root
        return ObjectStoreError(
            f"file archive {self.root}: {reason}: {where}",
            retriable=exc.errno in _RETRIABLE,
            kind="file",
        )

    def _put(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        final = self._path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        temporary = final.parent / f"{_TEMP}{uuid.uuid4().hex}"
        try:
            with temporary.open("xb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(temporary, final)
            except FileExistsError:
                same = same_content(body, metadata, final.read_bytes())
                return PutOutcome.REPLAYED if same else PutOutcome.CONFLICT
            _fsync_dir(final.parent)
            return PutOutcome.CREATED
        finally:
            temporary.unlink(missing_ok=True)

    async def list_keys(self, prefix: str) -> list[str]:
        """Files under the prefix (temporary files excluded), as sorted keys."""
        try:
            return await asyncio.to_thread(self._list, prefix)
        except OSError as exc:
            raise self._error(exc) from exc

    def _list(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        folder = base if prefix.endswith("/") or not prefix else base.parent
        if not folder.is_dir():
            return []
        keys = []
        for dirpath, _, filenames in os.walk(folder):
            for name in filenames:
                if name.startswith(_TEMP):
                    continue
                key = (Path(dirpath) / name).relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    async def get(self, key: str) -> bytes:
        """The file's bytes."""
        try:
            return await asyncio.to_thread(self._path(key).read_bytes)
        except FileNotFoundError:
            raise KeyError(key) from None
        except OSError as exc:
            raise self._error(exc) from exc


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
