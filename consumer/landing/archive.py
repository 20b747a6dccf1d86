"""Open the archive a URI names: S3 or a local folder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer.landing.files import FileObjectStore
from consumer.landing.objects import ArchiveUri, ObjectStore
from consumer.landing.s3 import S3ObjectStore

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client


def open_archive(uri: str, s3: S3Client) -> tuple[ObjectStore, str]:
    """The object store and key prefix for ``s3://bucket/prefix`` or ``file:///path``."""
    archive = ArchiveUri.parse(uri)
    if archive.scheme == "s3":
        return S3ObjectStore(s3, archive.bucket), archive.prefix
    return FileObjectStore(archive.path), ""
