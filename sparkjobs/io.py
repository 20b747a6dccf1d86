"""The few filesystem operations the jobs do outside Spark: list, read, write a manifest.

Two implementations of one small interface: :class:`LocalFilesystem` for ``file://``
(plain ``os``, with a write-then-rename that readers never see half done) and
:class:`HadoopFilesystem` for everything Spark can reach (``s3a://``, EMR's ``s3://``,
``hdfs://``) through the session's Hadoop client. On an object store a single small
PUT is atomic, which is all a manifest or a report needs.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class Listed:
    """A file found by a listing."""

    uri: str
    size: int
    modified_ms: int


class Filesystem(Protocol):
    """What the jobs need from a filesystem besides Spark's readers and writers."""

    def list_files(self, uri: str) -> list[Listed]:
        """Every file under ``uri``, recursively; empty if it does not exist."""
        ...

    def read(self, uri: str) -> bytes | None:
        """A whole (small) file, or None if it does not exist."""
        ...

    def write_atomic(self, uri: str, data: bytes) -> None:
        """Create or replace a small file so readers see the old or the new bytes."""
        ...

    def delete(self, uri: str) -> None:
        """Remove a file or a folder and everything in it, if there."""
        ...

    def move(self, source: str, target: str) -> None:
        """Move a file to ``target`` (a new name), creating its folders."""
        ...

    def remove_leftovers(self, uri: str) -> int:
        """Remove what a Spark write leaves beside its files under ``uri`` (the
        committer's ``_SUCCESS``, the local filesystem's ``.crc`` checksums); how many."""
        ...


LEFTOVERS = ("_SUCCESS",)
"""Files a Spark write leaves that are not its output (besides hidden ``.crc`` files)."""


def join(base: str, *parts: str) -> str:
    """``base/part/…`` for URIs and paths alike."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p.strip("/"))])


def local_path(uri: str) -> Path:
    """The local path of a ``file:`` URI (or of a plain path)."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"not a local URI: {uri}")
    return Path(unquote(parsed.path))


def is_local(uri: str) -> bool:
    """Whether ``uri`` is on the local filesystem."""
    return urlparse(uri).scheme in ("", "file")


class LocalFilesystem:
    """``file://`` URIs through ``os``."""

    def list_files(self, uri: str) -> list[Listed]:
        """Walk the folder; hidden and temporary names are skipped as Spark does."""
        found: list[Listed] = []
        _walk(str(local_path(uri)), found)
        return found

    def read(self, uri: str) -> bytes | None:
        """The file's bytes, or None."""
        try:
            return local_path(uri).read_bytes()
        except FileNotFoundError:
            return None

    def write_atomic(self, uri: str, data: bytes) -> None:
        """Write a temporary file beside it, fsync, rename over.

        The file is for readers (pointers, manifests, report.html), so it gets the mode
        a plain ``open()`` gives, 0o666 less the umask (0644 under umask 022), not the
        0600 of ``tempfile.mkstemp``; missing folders get 0o777 less the umask (0755).
        """
        path = local_path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_beside(path)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def delete(self, uri: str) -> None:
        """Remove a file or a tree."""
        path = local_path(uri)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def move(self, source: str, target: str) -> None:
        """A rename; missing folders get 0o777 less the umask."""
        path = local_path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(local_path(source), path)

    def remove_leftovers(self, uri: str) -> int:
        """``_SUCCESS`` and every ``.crc`` under the folder."""
        removed = 0
        for folder, _, names in os.walk(local_path(uri)):
            for name in names:
                if name in LEFTOVERS or (name.startswith(".") and name.endswith(".crc")):
                    Path(folder, name).unlink(missing_ok=True)
                    removed += 1
        return removed


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, uniquely named temporary file in ``path``'s folder, open for writing.

    Created as ``open()`` would create it (mode 0o666, the kernel applies the umask),
    with O_EXCL so that it is never someone else's file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.parent / f".tmp-{os.urandom(6).hex()}{path.name}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")  # pragma: no cover


class HadoopFilesystem:
    """Any URI the Spark session's Hadoop configuration can open."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(self._conf), path

    def list_files(self, uri: str) -> list[Listed]:
        """A recursive listing (one flat listing on S3A)."""
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return []
        found: list[Listed] = []
        files = fs.listFiles(path, True)
        while files.hasNext():
            status = files.next()
            name = status.getPath().getName()
            if name.startswith((".", "_")) or name.endswith(".crc"):
                continue
            found.append(
                Listed(status.getPath().toString(), status.getLen(), status.getModificationTime())
            )
        return found

    def read(self, uri: str) -> bytes | None:
        """The file's bytes, or None."""
        fs, path = self._fs(uri)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            data: bytes = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return data

    def write_atomic(self, uri: str, data: bytes) -> None:
        """On an object store, one PUT on close; elsewhere write then rename."""
        fs, path = self._fs(uri)
        scheme = urlparse(uri).scheme
        if scheme in ("s3", "s3a", "s3n", "gs", "abfs", "abfss"):
            out = fs.create(path, True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()
            return
        tmp = self._jvm.org.apache.hadoop.fs.Path(path.getParent(), f".tmp-{os.urandom(6).hex()}")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        fs.delete(path, False)
        if not fs.rename(tmp, path):
            raise OSError(f"could not publish {uri}")

    def delete(self, uri: str) -> None:
        """Remove a file or a tree."""
        fs, path = self._fs(uri)
        fs.delete(path, True)

    def move(self, source: str, target: str) -> None:
        """The filesystem's rename (on an object store a copy, then a delete)."""
        fs, path = self._fs(source)
        _, to = self._fs(target)
        fs.mkdirs(to.getParent())
        if not fs.rename(path, to):
            raise OSError(f"could not move {source} to {target}")

    def remove_leftovers(self, uri: str) -> int:
        """``_SUCCESS`` at the top (an object store keeps no checksums; the jobs'
        writes ask for no ``_SUCCESS``, so this is for a committer that wrote one)."""
        fs, path = self._fs(join(uri, "_SUCCESS"))
        return 1 if fs.exists(path) and fs.delete(path, False) else 0


def filesystem_for(uri: str, spark: SparkSession | None) -> Filesystem:
    """The filesystem that serves ``uri``."""
    if is_local(uri):
        return LocalFilesystem()
    if spark is None:
        raise ValueError(f"{uri}: a Spark session is needed to reach this filesystem")
    return HadoopFilesystem(spark)


def _walk(folder: str, found: list[Listed]) -> None:
    """Append the files under ``folder`` (os.scandir: no Path object per file, which was
    most of listing a day's ~9,000 objects)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    folders: list[str] = []
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        try:
            if entry.is_dir():  # as os.walk: a link to a folder is not followed
                if not entry.is_symlink():
                    folders.append(entry.path)
                continue
            stat = entry.stat()
        except FileNotFoundError:
            continue
        found.append(Listed(f"file://{entry.path}", stat.st_size, stat.st_mtime_ns // 1_000_000))
    for path in folders:
        _walk(path, found)
