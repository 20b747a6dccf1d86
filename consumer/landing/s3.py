"""The archive on S3: conditional puts (``If-None-Match: *``), multipart when large.

A multipart upload is made visible only by CompleteMultipartUpload, which carries the
same condition, so a large object too appears whole or not at all; a failed or
refused upload is aborted so no parts linger.

Every request carries the archive's :class:`~consumer.landing.protection.ObjectProtection`:
the encryption and tags where an object is created (PutObject, CreateMultipartUpload),
the expected bucket owner on all of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from consumer.archive.codec import CONTENT_TYPE
from consumer.aws import error_code, http_status
from consumer.landing.deflate import CONTENT_DIGEST, sha256
from consumer.landing.objects import ObjectStoreError, PutOutcome, digest_of, same_content
from consumer.landing.protection import ObjectProtection

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 8 * 1024 * 1024
_PRECONDITION = {"PreconditionFailed", "ConditionalRequestConflict"}


class S3ObjectStore:
    """Objects in one bucket; keys are full S3 keys."""

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        part_size: int = PART_SIZE,
        protection: ObjectProtection | None = None,
    ) -> None:
        self._client = client
        self.bucket = bucket
        self.protection = protection or ObjectProtection()
        self._owner: dict[str, Any] = dict(self.protection.owner_args())
        self._create: dict[str, Any] = self.protection.create_args()
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        """Create unless present; on 412 compare content digests."""
        digest = sha256(body)
        content = digest_of(body, metadata)
        meta = {**metadata, "sha256": digest, CONTENT_DIGEST: content}
        try:
            if len(body) >= self.multipart_threshold:
                await self._multipart(key, body, meta)
            else:
                await self._client.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=body,
                    IfNoneMatch="*",
                    Metadata=meta,
                    ContentType=CONTENT_TYPE,
                    **self._create,
                )
        except ClientError as exc:
            if error_code(exc) in _PRECONDITION or http_status(exc) == 412:
                return await self._compare(key, body, meta)
            raise _wrap(exc) from exc
        except BotoCoreError as exc:
            raise _wrap(exc) from exc
        return PutOutcome.CREATED

    async def _compare(self, key: str, body: bytes, meta: Mapping[str, str]) -> PutOutcome:
        """HEAD the object and compare its recorded content digest; an object landed
        before content digests has only its body's: equal bodies are a replay, else
        its body is read and its content digested."""
        try:
            head = await self._client.head_object(Bucket=self.bucket, Key=key, **self._owner)
        except (ClientError, BotoCoreError) as exc:
            raise _wrap(exc) from exc
        stored = head.get("Metadata", {})
        if CONTENT_DIGEST in stored:
            same = stored[CONTENT_DIGEST] == meta[CONTENT_DIGEST]
        elif stored.get("sha256") == meta["sha256"]:
            same = True
        else:
            same = same_content(body, meta, await self.get(key))
        return PutOutcome.REPLAYED if same else PutOutcome.CONFLICT

    async def _multipart(self, key: str, body: bytes, meta: Mapping[str, str]) -> None:
        upload = await self._client.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            Metadata=dict(meta),
            ContentType=CONTENT_TYPE,
            **self._create,
        )
        upload_id = upload["UploadId"]
        try:
            parts: list[Any] = []
            for number, start in enumerate(range(0, len(body), self.part_size), start=1):
                part = await self._client.upload_part(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=body[start : start + self.part_size],
                    **self._owner,
                )
                parts.append({"PartNumber": number, "ETag": part["ETag"]})
            await self._client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
                **self._owner,
            )
        except BaseException:
            with contextlib.suppress(ClientError, BotoCoreError):
                await self._client.abort_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id, **self._owner
                )
            raise

    async def list_keys(self, prefix: str) -> list[str]:
        """ListObjectsV2, every page."""
        keys: list[str] = []
        token: str | None = None
        try:
            while True:
                kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, **self._owner}
                if token:
                    kwargs["ContinuationToken"] = token
                page = await self._client.list_objects_v2(**kwargs)
                keys.extend(item["Key"] for item in page.get("Contents", []))
                token = page.get("NextContinuationToken")
                if not token:
                    return sorted(keys)
        except (ClientError, BotoCoreError) as exc:
            raise _wrap(exc) from exc

    async def get(self, key: str) -> bytes:
        """GetObject."""
        try:
            response = await self._client.get_object(Bucket=self.bucket, Key=key, **self._owner)
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404"):
                raise KeyError(key) from None
            raise _wrap(exc) from exc
        async with response["Body"] as stream:
            return await stream.read()


def _wrap(exc: BaseException) -> Exception:
    status = http_status(exc)
    retriable = status == 0 or status >= 500 or error_code(exc) in {"SlowDown", "Throttling"}
    kind = error_code(exc) or type(exc).__name__
    return ObjectStoreError(f"S3 {kind}: {str(exc)[:300]}", retriable=retriable, kind=kind)
