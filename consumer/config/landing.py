"""What the built-in processor (the lander) and the landing health checks of a worker need.

A mixin of the worker's :class:`~consumer.config.worker.Settings`: the archive's
protection on S3, the processor, how runs are cut into files and deflated, and the
landing-time dedupe. Where the archive is and its payload format are shared with the
batch jobs (:class:`~consumer.config.shared.Archive`).
"""

from __future__ import annotations

import importlib.util
import re
from typing import Self

from pydantic import Field, field_validator, model_validator

from consumer.config.fields import CONFIG, ArchiveSse, GzipCodec, check_pointer
from consumer.config.shared import Archive
from consumer.landing.fingerprint import check_digests
from consumer.landing.protection import ObjectProtection, check_owner, parse_tags

_WRITABLE = re.compile(r"^(s3://[^/]+(/.*)?|file:///.+)$")
"""The archives a worker writes: S3 through its API, or a local folder."""


class LandingSettings(Archive):
    """The archive's protection, the processor, the landed files and the landing dedupe."""

    model_config = CONFIG

    archive_sse: ArchiveSse = Field(
        default="none",
        description="Server-side encryption asked for on every landed object (s3:// "
        "archives): sse-s3 (AES256), sse-kms (with LANDER_ARCHIVE_KMS_KEY, or the "
        "account's aws/s3 key), or none: the bucket's default encryption applies.",
    )
    archive_kms_key: str | None = Field(
        default=None,
        description="With sse-kms: the KMS key (id, ARN, alias/name or alias ARN), "
        "checked at start (it must exist, be enabled and be a symmetric encryption key).",
    )
    archive_bucket_key: bool = Field(
        default=False,
        description="With sse-kms: use an S3 Bucket Key, so S3 asks KMS for data keys per "
        "bucket rather than per object (far fewer KMS requests; the encryption context "
        "becomes the bucket's ARN).",
    )
    archive_tags: str | None = Field(
        default=None,
        description="Tags on every landed object, key=value pairs separated by commas "
        "(at most 10; S3's tag characters).",
    )
    archive_expected_owner: str | None = Field(
        default=None,
        description="The account id that must own the archive's bucket: sent with every "
        "S3 request, so a bucket owned by anyone else refuses it (403).",
    )
    processor: str = Field(
        default="consumer.landing.lander:Lander",
        description="Record processor as module:Class (default: the built-in lander).",
    )
    max_records_per_file: int = Field(
        default=10_000, ge=1, description="A landed file holds at most this many records."
    )
    max_bytes_per_file: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="A landed file holds at most this many uncompressed bytes.",
    )
    flush_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Latency bound: a run spanning this many seconds of arrival time, or "
        "open this long on a quiet shard, lands.",
    )
    gzip_level: int = Field(
        default=1,
        ge=1,
        le=9,
        description="gzip level of landed files: 1 is fastest (the files are staging "
        "for the Parquet compaction); 6 makes them about 20% smaller for 2.5x the CPU.",
    )
    gzip_codec: GzipCodec = Field(
        default="auto",
        description="Which library deflates landed files: isal (ISA-L, from the isal "
        "wheel: the landing path about 20% faster, files about 10% smaller), zlib (the "
        "standard library), or auto (isal when its wheel is installed, else zlib). "
        "Readers see ordinary gzip either way, and workers with different codecs may "
        "share a stream: a replay is recognised by the SHA-256 of the uncompressed lines.",
    )
    event_id_pointer: str | None = Field(
        default=None,
        description="JSON pointer to a producer event id in the payload, e.g. /event_id.",
    )
    dedup_window: int = Field(
        default=0,
        ge=0,
        description="Per shard, drop a record whose event id was among this many recent "
        "ones (0: off; the compaction job removes producer duplicates anyway).",
    )
    dedup_keys: int = Field(
        default=0,
        ge=0,
        description="Per shard, drop a record without an event id whose number "
        "(LANDER_SEQUENCE_POINTER) was seen for its partition key: a watermark and the 64 "
        "numbers below it for each of this many recent keys (0: off). Never drops a number "
        "not seen; the compaction removes what it does not judge.",
    )
    landing_failures: int = Field(
        default=3,
        ge=1,
        description="Consecutive failures of one shard's processor after which the worker "
        "probes its archive; if the probe fails too, the worker stops being ready, gives "
        "all its shards back and takes none until a probe succeeds.",
    )

    landing_adopt: str | None = Field(
        default=None,
        description="Landing digests, separated by commas, as `lander run --check` prints "
        "them: a worker whose landing of a stream (archive, payload format, event-id "
        "pointer) has one of these digests makes it the fleet's, where it "
        "would otherwise be refused for landing otherwise than the fleet; workers with the "
        "old landing then give their shards back. For rolling out such a change on "
        "purpose (docs/operations.md).",
    )

    landing_check_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How often a running worker reads its streams' landing records again "
        "(one GetItem each): a worker whose landing was replaced by LANDER_LANDING_ADOPT "
        "gives its shards back within about this long.",
    )

    @field_validator("landing_adopt")
    @classmethod
    def _landing_adopt(cls, value: str | None) -> str | None:
        check_digests(value)
        return value

    @property
    def adopt_digests(self) -> frozenset[str]:
        """LANDER_LANDING_ADOPT's digests."""
        return check_digests(self.landing_adopt)

    @field_validator("event_id_pointer")
    @classmethod
    def _event_id_pointer(cls, value: str | None) -> str | None:
        return check_pointer(value)

    @field_validator("gzip_codec")
    @classmethod
    def _codec_installed(cls, value: str) -> str:
        if value == "isal" and importlib.util.find_spec("isal") is None:
            raise ValueError("isal needs the isal wheel (pip install isal), or set zlib")
        return value

    @field_validator("archive_tags")
    @classmethod
    def _archive_tags(cls, value: str | None) -> str | None:
        if value is not None:
            parse_tags(value)
        return value

    @field_validator("archive_expected_owner")
    @classmethod
    def _archive_owner(cls, value: str | None) -> str | None:
        return None if value is None else check_owner(value)

    @field_validator("archive")
    @classmethod
    def _writable(cls, value: str | None) -> str | None:
        if value is not None and not _WRITABLE.match(value):
            raise ValueError("must be s3://bucket[/prefix] or file:///absolute/path for a worker")
        return value

    @model_validator(mode="after")
    def _archive_protection(self) -> Self:
        protection = ObjectProtection.from_settings(self)
        found = protection.problems()
        local = self.archive is not None and not self.archive.startswith("s3://")
        if not found and local and not protection.is_default:
            found.append(
                f"the LANDER_ARCHIVE_SSE, _KMS_KEY, _BUCKET_KEY, _TAGS and "
                f"_EXPECTED_OWNER settings apply to an s3:// archive, not {self.archive}"
            )
        if found:
            raise ValueError("; ".join(found))
        return self

    @model_validator(mode="after")
    def _dedup_keys(self) -> Self:
        if self.dedup_keys and self.sequence_pointer is None:
            raise ValueError(
                "LANDER_DEDUP_KEYS needs LANDER_SEQUENCE_POINTER: the number it remembers"
            )
        return self
