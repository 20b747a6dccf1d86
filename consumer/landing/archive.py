"""Open the archive a URI names: S3 or a local folder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from consumer.landing.files import FileObjectStore
from consumer.landing.objects import ArchiveUri, ObjectStore
from consumer.landing.protection import ObjectProtection
from consumer.landing.s3 import S3ObjectStore

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client


def open_archive(
    uri: str, s3: S3Client, protection: ObjectProtection | None = None
) -> tuple[ObjectStore, str]:
    """The object store and key prefix for ``s3://bucket/prefix`` or ``file:///path``;
    ``protection`` applies to S3 (settings refuse it for a folder)."""
    archive = ArchiveUri.parse(uri)
    if archive.scheme == "s3":
        return S3ObjectStore(s3, archive.bucket, protection=protection), archive.prefix
    return FileObjectStore(archive.path), ""
