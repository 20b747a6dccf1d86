"""One contract for the archive: memory, a local folder, and S3 on the emulator."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from consumer.aws import Clients
from consumer.landing.deflate import CONTENT_DIGEST, gzip_bytes, sha256
from consumer.landing.files import FileObjectStore
from consumer.landing.objects import ArchiveUri, MemoryObjectStore, ObjectStore, PutOutcome
from consumer.landing.s3 import S3ObjectStore


@pytest.fixture(params=["memory", "file", pytest.param("s3", marks=pytest.mark.emulator)])
def clients(request: pytest.FixtureRequest) -> tuple[str, Clients | None]:
    """The backend's name, and the emulator's clients for S3 only: requested only then,
    so that the other variants boot no emulator (and run in `make test-fast`)."""
    if request.param != "s3":
        return request.param, None
    aws: Clients = request.getfixturevalue("aws_clients")
    return request.param, aws


@pytest.fixture
async def store(clients: tuple[str, Clients | None], tmp_path: Path) -> AsyncIterator[ObjectStore]:
    """An empty archive on each backend."""
    backend, aws = clients
    if backend == "memory":
        yield MemoryObjectStore()
    elif backend == "file":
        yield FileObjectStore(tmp_path / "archive")
    else:
        assert aws is not None
        bucket = f"archive-{uuid.uuid4().hex[:12]}"
        await aws.s3.create_bucket(Bucket=bucket)
        # A small multipart threshold so the contract covers that path too.
        yield S3ObjectStore(
            aws.s3, bucket, multipart_threshold=6 * 1024 * 1024, part_size=5 * 1024 * 1024
        )


async def test_create_then_replay_then_conflict(store: ObjectStore) -> None:
    """First put creates; the same body again is a replay; another body is a conflict,
    and the first body is kept."""
    key = "p/stream=s/dt=2026-11-22/hour=06/minute=00/shard=a/1-2.jsonl.gz"
    assert await store.put_if_absent(key, b"one", {"records": "1"}) is PutOutcome.CREATED
    assert await store.put_if_absent(key, b"one", {"records": "1"}) is PutOutcome.REPLAYED
    assert await store.put_if_absent(key, b"two", {"records": "1"}) is PutOutcome.CONFLICT
    assert await store.get(key) == b"one"


async def test_racing_puts_have_one_creator(store: ObjectStore) -> None:
    """Ten concurrent puts of one key: one creates, the rest see replays or conflicts."""
    bodies = [f"body-{i % 2}".encode() for i in range(10)]
    outcomes = await asyncio.gather(*(store.put_if_absent("race/k", b, {}) for b in bodies))
    assert outcomes.count(PutOutcome.CREATED) == 1
    winner = await store.get("race/k")
    for body, outcome in zip(bodies, outcomes, strict=True):
        if outcome is not PutOutcome.CREATED:
            expected = PutOutcome.REPLAYED if body == winner else PutOutcome.CONFLICT
            assert outcome is expected


async def test_list_by_prefix(store: ObjectStore) -> None:
    """Listing returns exactly the keys under a folder prefix, sorted."""
    for key in ("a/x/1", "a/x/2", "a/y/1", "b/x/1"):
        await store.put_if_absent(key, key.encode(), {})
    assert await store.list_keys("a/x/") == ["a/x/1", "a/x/2"]
    assert await store.list_keys("a/") == ["a/x/1", "a/x/2", "a/y/1"]
    assert await store.list_keys("c/") == []


async def test_large_object_lands_whole(store: ObjectStore) -> None:
    """An object above the multipart threshold lands whole, and conditionally."""
    body = os.urandom(11 * 1024 * 1024)
    assert await store.put_if_absent("big/k", body, {}) is PutOutcome.CREATED
    assert await store.get("big/k") == body
    assert await store.put_if_absent("big/k", body, {}) is PutOutcome.REPLAYED


async def test_missing_key_is_a_key_error(store: ObjectStore) -> None:
    """Reading a key that was never written raises KeyError."""
    with pytest.raises(KeyError):
        await store.get("nothing/here")


@pytest.mark.emulator
async def test_s3_lists_past_one_page(aws_clients: Clients) -> None:
    """Listing follows continuation tokens past 1,000 keys."""
    bucket = f"many-{uuid.uuid4().hex[:12]}"
    await aws_clients.s3.create_bucket(Bucket=bucket)
    store = S3ObjectStore(aws_clients.s3, bucket)
    keys = [f"m/{i:05d}" for i in range(1005)]
    semaphore = asyncio.Semaphore(20)

    async def put(key: str) -> None:
        async with semaphore:
            await store.put_if_absent(key, b"x", {})

    await asyncio.gather(*(put(k) for k in keys))
    assert await store.list_keys("m/") == keys


def test_file_store_leaves_no_temporary_files(tmp_path: Path) -> None:
    """A refused put removes its temporary file; readers never see partial files."""

    async def run() -> None:
        files = FileObjectStore(tmp_path)
        await files.put_if_absent("d/k", b"1", {})
        await files.put_if_absent("d/k", b"2", {})
        assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["k"]

    asyncio.run(run())


def test_archive_uris() -> None:
    """Only s3://bucket[/prefix] and file:///absolute are archives."""
    assert ArchiveUri.parse("s3://b/p/q/") == ArchiveUri("s3", "b", "p/q", "")
    assert ArchiveUri.parse("file:///data/archive") == ArchiveUri("file", "", "", "/data/archive")
    for bad in ("s3://", "file://relative", "http://x/y", "/data"):
        with pytest.raises(ValueError, match="archive must be"):
            ArchiveUri.parse(bad)


async def test_probe_passes_twice_and_leaves_one_reserved_object(store: ObjectStore) -> None:
    """The archive probe creates the reserved object, passes again on a second run (a
    replay), and leaves nothing under ``stream=`` for readers."""
    from consumer.landing.objects import PROBE_KEY, probe

    await probe(store, "landed")
    await probe(store, "landed")
    assert await store.list_keys("landed/") == [f"landed/{PROBE_KEY}"]


async def test_probe_fails_where_conditional_writes_are_ignored() -> None:
    """An archive that creates an object twice (ignoring If-None-Match, as s3rver
    does) fails the probe with a non-retriable error that says why."""
    from consumer.landing.objects import ObjectStoreError, probe

    class Ignoring(MemoryObjectStore):
        async def put_if_absent(
            self, key: str, body: bytes, metadata: Mapping[str, str]
        ) -> PutOutcome:
            self.objects[key] = body
            return PutOutcome.CREATED

    with pytest.raises(ObjectStoreError, match="If-None-Match") as caught:
        await probe(Ignoring(), "p")
    assert not caught.value.retriable


async def test_unwritable_folder_is_a_non_retriable_store_error(tmp_path: Path) -> None:
    """A file archive under a path that cannot be a folder fails with an
    ObjectStoreError naming the archive, not a bare OSError (works as root too)."""
    from consumer.landing.objects import ObjectStoreError, probe

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the archive's folder should be")
    with pytest.raises(ObjectStoreError, match="not-a-folder") as caught:
        await probe(FileObjectStore(blocker / "archive"), "")
    assert not caught.value.retriable


@pytest.mark.emulator
async def test_missing_bucket_is_a_non_retriable_store_error(aws_clients: Clients) -> None:
    """A bucket that does not exist fails the probe at once (NoSuchBucket is not
    retried), with the error code in the message."""
    from consumer.landing.objects import ObjectStoreError, probe

    missing = S3ObjectStore(aws_clients.s3, f"missing-{uuid.uuid4().hex[:12]}")
    with pytest.raises(ObjectStoreError, match="NoSuchBucket") as caught:
        await probe(missing, "landed")
    assert not caught.value.retriable


async def test_a_replay_is_the_same_content_however_it_was_compressed(
    store: ObjectStore,
) -> None:
    """Replays compare the uncompressed content (``content-sha256``), not the bytes: the
    same lines compressed at another level (or by another codec) are a replay; other
    lines are a conflict; the first body is kept."""
    lines = b"".join(b'{"n": %d}\n' % i for i in range(500))
    digest = {CONTENT_DIGEST: sha256(lines)}
    fast, small = gzip_bytes(lines, 1), gzip_bytes(lines, 9)
    assert fast != small
    key = "p/stream=s/shard=a/1-500.jsonl.gz"
    assert await store.put_if_absent(key, fast, digest) is PutOutcome.CREATED
    assert await store.put_if_absent(key, small, digest) is PutOutcome.REPLAYED
    other = b'{"n": -1}\n'
    assert (
        await store.put_if_absent(key, gzip_bytes(other), {CONTENT_DIGEST: sha256(other)})
        is PutOutcome.CONFLICT
    )
    assert await store.get(key) == fast


@pytest.mark.emulator
async def test_an_s3_object_landed_before_content_digests_is_read_to_compare(
    aws_clients: Clients,
) -> None:
    """An object an earlier release landed carries only its body's SHA-256: a replay
    with other bytes reads the object and compares its content."""
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    await aws_clients.s3.create_bucket(Bucket=bucket)
    store = S3ObjectStore(aws_clients.s3, bucket)
    lines = b"".join(b'{"n": %d}\n' % i for i in range(500))
    old = gzip_bytes(lines, 1)
    await aws_clients.s3.put_object(
        Bucket=bucket, Key="k", Body=old, Metadata={"sha256": sha256(old), "records": "500"}
    )
    assert await store.put_if_absent("k", old, {}) is PutOutcome.REPLAYED
    again = gzip_bytes(lines, 9)
    assert await store.put_if_absent("k", again, {CONTENT_DIGEST: sha256(lines)}) is (
        PutOutcome.REPLAYED
    )
    other = b'{"n": -1}\n'
    assert (
        await store.put_if_absent("k", gzip_bytes(other), {CONTENT_DIGEST: sha256(other)})
        is PutOutcome.CONFLICT
    )
