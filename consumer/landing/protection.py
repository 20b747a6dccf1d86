"""What every landed object carries for the compliance team: encryption, owner, tags.

Settings (``LANDER_ARCHIVE_SSE``, ``_KMS_KEY``, ``_BUCKET_KEY``, ``_TAGS``,
``_EXPECTED_OWNER``) become one :class:`ObjectProtection`, which the S3 store passes on
every call: the encryption and tags on PutObject and CreateMultipartUpload (a multipart
upload's parts inherit them), the expected bucket owner on every request, so a bucket
that changed hands is refused (403) instead of written to.

With ``sse-kms`` and a key, the worker's start-up checks describe the key first
(:func:`check_kms_key`): a key that does not exist, is disabled or cannot encrypt
refuses the worker with one line, before it takes a shard. Pure apart from that check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from consumer.errors import RefusedError

if TYPE_CHECKING:
    from types_aiobotocore_kms import KMSClient

Sse = Literal["none", "sse-s3", "sse-kms"]

MAX_TAGS = 10
"""S3 keeps at most ten tags on an object."""
_TAG_TEXT = re.compile(r"^[\w\s+\-=.:/@]*$")
"""The characters S3 allows in a tag key or value (letters and digits of any script)."""
_ACCOUNT = re.compile(r"^\d{12}$")
_ALGORITHM = {"sse-s3": "AES256", "sse-kms": "aws:kms"}
_GATE_DENIED = {"AccessDeniedException", "AccessDenied"}


class KmsKeyError(RefusedError):
    """The archive's KMS key cannot encrypt: missing, disabled, or not a symmetric
    encryption key. The message is the one line ``lander run`` prints."""


def parse_tags(text: str) -> tuple[tuple[str, str], ...]:
    """``key=value,key2=value2`` as S3 object tags, in the order given.

    Raises ValueError with the reason: more than :data:`MAX_TAGS`, a key given twice,
    an empty or over-long key (128) or value (256), a character S3 refuses, or a key
    in the reserved ``aws:`` namespace.
    """
    tags: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise ValueError(f"{item.strip()!r} is not key=value")
        if len(key) > 128 or len(value) > 256:
            raise ValueError(f"tag {key[:40]!r}: keys hold 128 characters, values 256")
        if not (_TAG_TEXT.match(key) and _TAG_TEXT.match(value)):
            raise ValueError(
                f"tag {key!r}: S3 allows letters, digits, spaces and + - = . _ : / @ only"
            )
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag {key!r}: the aws: prefix is reserved")
        if any(key == seen for seen, _ in tags):
            raise ValueError(f"tag {key!r} is given twice")
        tags.append((key, value))
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags: S3 keeps at most {MAX_TAGS} on an object")
    return tuple(tags)


def check_owner(value: str) -> str:
    """An AWS account id: twelve digits."""
    if not _ACCOUNT.match(value):
        raise ValueError("must be a 12-digit AWS account id")
    return value


@dataclass(frozen=True, slots=True)
class ObjectProtection:
    """The encryption, tags and expected owner of every object the worker writes."""

    sse: Sse = "none"
    """none: the bucket's default encryption applies (S3 encrypts every new object,
    SSE-S3 unless the bucket says otherwise); sse-s3 or sse-kms: asked for on each put."""
    kms_key: str | None = None
    """With sse-kms: a key id, key ARN, alias name or alias ARN (None: the account's
    AWS managed key for S3, ``aws/s3``)."""
    bucket_key: bool = False
    """With sse-kms: an S3 Bucket Key, so S3 asks KMS for a data key per bucket and
    period instead of per object (far fewer KMS requests; the encryption context is
    then the bucket's ARN, which key policies that name object ARNs must allow)."""
    tags: tuple[tuple[str, str], ...] = ()
    expected_owner: str | None = None
    """The bucket owner's account id, sent as ``x-amz-expected-bucket-owner``."""

    @classmethod
    def from_settings(cls, settings: Any) -> ObjectProtection:
        """From :class:`consumer.config.Settings` (validated there)."""
        return cls(
            sse=settings.archive_sse,
            kms_key=settings.archive_kms_key,
            bucket_key=settings.archive_bucket_key,
            tags=parse_tags(settings.archive_tags or ""),
            expected_owner=settings.archive_expected_owner,
        )

    def problems(self) -> list[str]:
        """Settings that contradict each other, one sentence each (empty: none)."""
        found = []
        if self.kms_key is not None and self.sse != "sse-kms":
            found.append("LANDER_ARCHIVE_KMS_KEY needs LANDER_ARCHIVE_SSE=sse-kms")
        if self.bucket_key and self.sse != "sse-kms":
            found.append("LANDER_ARCHIVE_BUCKET_KEY needs LANDER_ARCHIVE_SSE=sse-kms")
        return found

    @property
    def is_default(self) -> bool:
        """Nothing asked for: the store's calls are as they were without settings."""
        return self == ObjectProtection()

    def owner_args(self) -> dict[str, str]:
        """For every S3 request on the archive's bucket."""
        return {"ExpectedBucketOwner": self.expected_owner} if self.expected_owner else {}

    def create_args(self) -> dict[str, Any]:
        """For PutObject and CreateMultipartUpload: encryption, tags and owner."""
        args: dict[str, Any] = self.owner_args()
        if self.sse != "none":
            args["ServerSideEncryption"] = _ALGORITHM[self.sse]
        if self.sse == "sse-kms":
            if self.kms_key is not None:
                args["SSEKMSKeyId"] = self.kms_key
            if self.bucket_key:
                args["BucketKeyEnabled"] = True
        if self.tags:
            args["Tagging"] = tagging(self.tags)
        return args

    def describe(self) -> Mapping[str, object]:
        """For the start-up log line (the key id is not a secret; the tags' values may
        be, so only their keys)."""
        return {
            "sse": self.sse,
            "kms_key": self.kms_key,
            "bucket_key": self.bucket_key,
            "tag_keys": [key for key, _ in self.tags],
            "expected_owner": self.expected_owner,
        }


def tagging(tags: tuple[tuple[str, str], ...]) -> str:
    """The ``x-amz-tagging`` header: URL-encoded ``key=value`` pairs joined by ``&``."""
    return "&".join(f"{quote(key, safe='')}={quote(value, safe='')}" for key, value in tags)


async def check_kms_key(kms: KMSClient, key: str) -> str:
    """The key's ARN, when it can encrypt S3 objects; else :class:`KmsKeyError`.

    Access denied to DescribeKey is not a refusal (a key policy may grant
    GenerateDataKey without it): the probe's put, which uses the key, decides then; the
    key is returned as given.
    """
    # Imported here: the settings import this module and need no botocore.
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    from consumer.aws import error_code  # noqa: PLC0415

    where = f"KMS at {kms.meta.endpoint_url}"
    try:
        found = (await kms.describe_key(KeyId=key))["KeyMetadata"]
    except ClientError as exc:
        code = error_code(exc)
        if code in _GATE_DENIED:
            return key
        if code == "NotFoundException":
            raise KmsKeyError(
                f"KMS key {key} (LANDER_ARCHIVE_KMS_KEY) does not exist in region "
                f"{kms.meta.region_name} ({where})"
            ) from None
        raise KmsKeyError(f"KMS key {key} is not usable ({where}): {code or exc}") from None
    except (BotoCoreError, OSError) as exc:
        raise KmsKeyError(f"cannot reach {where}: {type(exc).__name__}: {exc}"[:300]) from None
    state, usage = found.get("KeyState", "Enabled"), found.get("KeyUsage", "ENCRYPT_DECRYPT")
    spec = found.get("KeySpec", "SYMMETRIC_DEFAULT")
    if state != "Enabled":
        raise KmsKeyError(f"KMS key {key} (LANDER_ARCHIVE_KMS_KEY) is {state}, not Enabled")
    if usage != "ENCRYPT_DECRYPT" or spec != "SYMMETRIC_DEFAULT":
        raise KmsKeyError(
            f"KMS key {key} (LANDER_ARCHIVE_KMS_KEY) is {spec} for {usage}: S3 encrypts "
            "with symmetric encryption keys (SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT) only"
        )
    return str(found["Arn"])
