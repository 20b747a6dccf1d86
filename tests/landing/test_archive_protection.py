"""Encryption, tags and the expected owner of landed objects, on the emulator (moto's S3
and KMS), read back with plain boto3: what S3 stored for every object is what the
settings asked for, on small puts, multipart uploads, dead letters and the probe; a KMS
key that cannot encrypt refuses the worker at start with one line."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.local_aws import boto3_client
from consumer.aws import Clients
from consumer.landing.objects import PutOutcome
from consumer.landing.protection import ObjectProtection
from consumer.landing.s3 import S3ObjectStore
from tests.support.cli import EXIT_REFUSED, one_line, run_lander
from tests.support.cluster import Cluster

pytestmark = pytest.mark.emulator

OWNER = "123456789012"
"""moto's account id, which owns every bucket it makes."""
TAGS = (("team", "data platform"), ("class", "pii:low"), ("cost-centre", "4711/a@b"))


@pytest.fixture
def kms_key(aws_env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A fresh symmetric key and an alias naming it: (alias, key ARN)."""
    kms = boto3_client(aws_env, "kms")
    meta = kms.create_key(Description="lander test")["KeyMetadata"]
    alias = f"alias/lander-{uuid.uuid4().hex[:8]}"
    kms.create_alias(AliasName=alias, TargetKeyId=meta["KeyId"])
    yield alias, meta["Arn"]
    kms.schedule_key_deletion(KeyId=meta["KeyId"], PendingWindowInDays=7)


def _header(request: Any, name: str) -> str | None:
    value = request.headers.get(name)
    return value.decode() if isinstance(value, bytes) else value


def _stored(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    head = s3.head_object(Bucket=bucket, Key=key)
    tags = s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return {
        "sse": head.get("ServerSideEncryption"),
        "key": head.get("SSEKMSKeyId"),
        "bucket_key": head.get("BucketKeyEnabled"),
        "tags": tuple((t["Key"], t["Value"]) for t in tags),
    }


async def test_every_create_carries_encryption_tags_and_owner(
    aws_clients: Clients, aws_env: dict[str, str], kms_key: tuple[str, str]
) -> None:
    """A small put and a multipart upload are stored with the key, the bucket key and
    the tags; every request of the store, reads included, names the expected owner."""
    alias, _ = kms_key
    bucket = f"protected-{uuid.uuid4().hex[:10]}"
    await aws_clients.s3.create_bucket(Bucket=bucket)
    protection = ObjectProtection("sse-kms", alias, True, TAGS, OWNER)
    store = S3ObjectStore(
        aws_clients.s3,
        bucket,
        multipart_threshold=6 * 1024 * 1024,
        part_size=5 * 1024 * 1024,
        protection=protection,
    )
    sent: list[tuple[str, str | None]] = []
    bucket_keys: dict[str, str | None] = {}

    def record(request: Any, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", maxsplit=1)[-1]
        sent.append((operation, _header(request, "x-amz-expected-bucket-owner")))
        bucket_keys[operation] = _header(request, "x-amz-server-side-encryption-bucket-key-enabled")

    events = aws_clients.s3.meta.events
    events.register("before-send.s3.*", record)
    try:
        assert await store.put_if_absent("p/small", b"small body", {}) is PutOutcome.CREATED
        big = b"x" * (7 * 1024 * 1024)
        assert await store.put_if_absent("p/big", big, {}) is PutOutcome.CREATED
        assert await store.put_if_absent("p/small", b"small body", {}) is PutOutcome.REPLAYED
        assert await store.list_keys("p/") == ["p/big", "p/small"]
        assert await store.get("p/small") == b"small body"
    finally:
        events.unregister("before-send.s3.*", record)

    s3 = boto3_client(aws_env, "s3")
    want = {"sse": "aws:kms", "key": alias, "bucket_key": True, "tags": TAGS}
    assert _stored(s3, bucket, "p/small") == want
    # moto keeps no bucket-key flag for a multipart upload, so that flag is checked on
    # the request that asks for it.
    assert _stored(s3, bucket, "p/big") == {**want, "bucket_key": None}
    assert bucket_keys["CreateMultipartUpload"] == bucket_keys["PutObject"] == "true"
    operations = {name for name, _ in sent}
    assert {
        "PutObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "HeadObject",
        "ListObjectsV2",
        "GetObject",
    } <= operations, operations
    assert {owner for _, owner in sent} == {OWNER}, sent


async def test_sse_s3_and_the_defaults(aws_clients: Clients, aws_env: dict[str, str]) -> None:
    """sse-s3 asks for AES256; no setting sends no encryption, tag or owner header (the
    bucket's defaults apply, as before these settings existed)."""
    bucket = f"plain-{uuid.uuid4().hex[:10]}"
    await aws_clients.s3.create_bucket(Bucket=bucket)
    await S3ObjectStore(
        aws_clients.s3, bucket, protection=ObjectProtection("sse-s3")
    ).put_if_absent("a", b"a", {})
    await S3ObjectStore(aws_clients.s3, bucket).put_if_absent("b", b"b", {})
    s3 = boto3_client(aws_env, "s3")
    assert _stored(s3, bucket, "a")["sse"] == "AES256"
    assert _stored(s3, bucket, "b") == {"sse": None, "key": None, "bucket_key": None, "tags": ()}


@pytest.mark.processes
def test_a_worker_lands_every_object_protected(
    aws_env: dict[str, str], kms_key: tuple[str, str], tmp_path: Path
) -> None:
    """A real worker with every setting: its data objects, a dead letter and the probe
    object are all stored encrypted with the key and tagged, and every record lands once."""
    _, arn = kms_key
    cluster = Cluster(
        aws_env,
        tmp_path / "c",
        1,
        extra_env={
            "LANDER_FLUSH_SECONDS": "1",
            "LANDER_MAX_RECORDS_PER_FILE": "40",
            "LANDER_ARCHIVE_SSE": "SSE-KMS",
            "LANDER_ARCHIVE_KMS_KEY": arn,
            "LANDER_ARCHIVE_BUCKET_KEY": "true",
            "LANDER_ARCHIVE_TAGS": ",".join(f"{k}={v}" for k, v in TAGS),
            "LANDER_ARCHIVE_EXPECTED_OWNER": OWNER,
        },
    )
    cluster.with_archive()
    try:
        cluster.produce(100)
        cluster.put_raw(b"{not json")
        cluster.start("w1")
        ids = cluster.wait_all_archived()
        assert set(ids.values()) == {1}
        _, dead = cluster.archive_lines()
        assert len(dead) == 1
        keys = [
            item["Key"] for item in cluster.s3.list_objects_v2(Bucket=cluster.bucket)["Contents"]
        ]
        assert any("/dead-letter/" in key for key in keys)
        assert len(keys) == len(cluster.archive_keys()) + 1  # the probe object
        for key in keys:
            assert _stored(cluster.s3, cluster.bucket, key) == {
                "sse": "aws:kms",
                "key": arn,
                "bucket_key": True,
                "tags": TAGS,
            }, key
    finally:
        cluster.stop_all()


@pytest.mark.processes
def test_a_kms_key_that_cannot_encrypt_refuses_the_worker(
    aws_env: dict[str, str], kms_key: tuple[str, str]
) -> None:
    """A key that does not exist, or is disabled, stops `lander run` with exit 3 and one
    line naming the key and the setting; with the key enabled the checks pass."""
    alias, arn = kms_key
    kinesis, s3, kms = (boto3_client(aws_env, s) for s in ("kinesis", "s3", "kms"))
    stream, bucket = f"kms-{uuid.uuid4().hex[:8]}", f"kms-{uuid.uuid4().hex[:10]}"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=stream, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100}
    )
    s3.create_bucket(Bucket=bucket)
    env = {
        "PATH": str(Path(sys.executable).parent),
        **aws_env,
        "LANDER_STREAM": stream,
        "LANDER_LEASE_TABLE": f"{stream}-leases",
        "LANDER_ARCHIVE": f"s3://{bucket}/landed",
        "LANDER_ARCHIVE_SSE": "sse-kms",
        "LANDER_LOG_FORMAT": "json",
    }

    def refusal(key: str) -> str:
        done = run_lander({**env, "LANDER_ARCHIVE_KMS_KEY": key}, "run")
        assert done.returncode == EXIT_REFUSED, done.stderr
        return one_line(done)

    assert "KMS key alias/no-such-key (LANDER_ARCHIVE_KMS_KEY) does not exist" in refusal(
        "alias/no-such-key"
    )
    kms.disable_key(KeyId=arn.rsplit("/", 1)[-1])
    assert f"KMS key {alias} (LANDER_ARCHIVE_KMS_KEY) is Disabled, not Enabled" in refusal(alias)
    kms.enable_key(KeyId=arn.rsplit("/", 1)[-1])
    done = run_lander({**env, "LANDER_ARCHIVE_KMS_KEY": alias}, "run", "--check")
    assert done.returncode == 0, done.stderr
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 1  # the probe, encrypted
