"""The archive as a narrow interface: create-if-absent, list, read.

Three implementations keep one contract (tested by one suite): S3 (``s3://``, any
S3-compatible endpoint honouring ``If-None-Match: *``), a local filesystem
(``file://``: write a temporary file, then ``link`` it into place, so a file appears
whole or not at all and never overwrites), and memory (tests).

A put that finds the key taken compares content digests (SHA-256 of the uncompressed
lines, :mod:`.codec`): the same content is a replay (success), however it was
compressed; different content is a conflict; the existing object is kept either way.
The lander passes the digest in the metadata (``content-sha256``); without it, it is
computed from the body.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlparse

from consumer.errors import LanderError
from consumer.landing.deflate import CONTENT_DIGEST, content_digest


class PutOutcome(enum.StrEnum):
    """What a create-if-absent put found."""

    CREATED = "created"
    REPLAYED = "replayed"
    """The key existed with the same body: an earlier attempt or owner landed it."""
    CONFLICT = "conflict"
    """The key existed with another body: kept as it is, counted and logged."""


class ObjectStore(Protocol):
    """Where landed objects go."""

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        """Create ``key`` with ``body`` unless it exists."""

    async def list_keys(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (all pages)."""

    async def get(self, key: str) -> bytes:
        """An object's body (``KeyError`` if missing)."""


class ObjectStoreError(LanderError):
    """A put, list or read of the archive failed.

    ``retriable`` says whether trying again soon might help (a 5xx, a throttle, a
    reset connection) or not (a missing bucket, access denied, a read-only folder);
    ``kind`` is a short label for metrics (the S3 error code, ``file``, ...).
    """

    def __init__(self, message: str, *, retriable: bool = True, kind: str = "other") -> None:
        super().__init__(message)
        self.retriable = retriable
        self.kind = kind[:40]


PROBE_KEY = "_lander/probe.json"
"""The archive's reserved key: every worker creates it (or finds it) at start and
whenever it checks whether it can land again. Readers of ``stream=…`` never see it."""
_PROBE_BODY = b'{"written_by": "kinesis-lander", "purpose": "archive write probe"}\n'


async def probe(store: ObjectStore, prefix: str) -> None:
    """Prove the archive takes conditional writes from this worker.

    Creates the reserved probe object (or finds it there: a replay), then puts it again
    and expects a replay: an endpoint that creates the object twice ignores
    ``If-None-Match`` and would break exactly-once, so it fails the probe too. Raises
    :class:`ObjectStoreError` (or the backend's own error) when the archive cannot be
    written. The object is left in place, so workers need no delete permission.
    """
    key = f"{prefix.rstrip('/')}/{PROBE_KEY}" if prefix else PROBE_KEY
    await store.put_if_absent(key, _PROBE_BODY, {"purpose": "probe"})
    again = await store.put_if_absent(key, _PROBE_BODY, {"purpose": "probe"})
    if again is not PutOutcome.REPLAYED:
        raise ObjectStoreError(
            f"the archive does not honour conditional writes (a second put of {key} gave "
            f"{again}); exactly-once landing needs If-None-Match",
            retriable=False,
            kind="not_conditional",
        )


def digest_of(body: bytes, metadata: Mapping[str, str]) -> str:
    """The content digest of a body: as its metadata states it, else computed."""
    return metadata.get(CONTENT_DIGEST) or content_digest(body)


def same_content(body: bytes, metadata: Mapping[str, str], existing: bytes) -> bool:
    """Whether a put of ``body`` replays an existing object of which only the body is
    known (the file archive; S3 objects landed before content digests)."""
    return body == existing or digest_of(body, metadata) == content_digest(existing)


@dataclass(frozen=True, slots=True)
class ArchiveUri:
    """``s3://bucket/prefix`` or ``file:///path``."""

    scheme: str
    bucket: str
    prefix: str
    path: str

    @classmethod
    def parse(cls, uri: str) -> ArchiveUri:
        """Parse an archive URI, rejecting anything else with a clear error."""
        parsed = urlparse(uri)
        if parsed.scheme == "s3" and parsed.netloc:
            return cls("s3", parsed.netloc, parsed.path.strip("/"), "")
        if parsed.scheme == "file" and parsed.path.startswith("/") and not parsed.netloc:
            return cls("file", "", "", parsed.path)
        raise ValueError(f"archive must be s3://bucket[/prefix] or file:///path, got {uri!r}")


class MemoryObjectStore:
    """A dict of objects."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.metadata: dict[str, dict[str, str]] = {}

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        """Create unless present."""
        existing = self.objects.get(key)
        if existing is None:
            self.objects[key] = body
            self.metadata[key] = {**metadata, CONTENT_DIGEST: digest_of(body, metadata)}
            return PutOutcome.CREATED
        same = self.metadata[key][CONTENT_DIGEST] == digest_of(body, metadata)
        return PutOutcome.REPLAYED if same else PutOutcome.CONFLICT

    async def list_keys(self, prefix: str) -> list[str]:
        """Keys under the prefix, sorted."""
        return sorted(key for key in self.objects if key.startswith(prefix))

    async def get(self, key: str) -> bytes:
        """The body."""
        return self.objects[key]
