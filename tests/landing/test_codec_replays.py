"""Replays do not depend on the compressor: workers with different deflate libraries,
levels and chunk sizes that land the same records see a replay, never a conflict.

A replay is decided on the SHA-256 of the uncompressed lines (``content-sha256``), so a
rolling upgrade that changes ``LANDER_GZIP_CODEC`` or ``LANDER_GZIP_LEVEL`` meets the
objects the old workers landed as replays. Objects landed before that digest existed
(only the body's SHA-256 in their metadata, or none in a folder) are read and digested.
"""

from __future__ import annotations

import asyncio
import gzip
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.landing.batcher import Batcher, LandedRun
from consumer.landing.deflate import (
    CONTENT_DIGEST,
    CodecName,
    available,
    content_digest,
    gzip_bytes,
    sha256,
)
from consumer.landing.files import FileObjectStore
from consumer.landing.objects import MemoryObjectStore, ObjectStore, PutOutcome
from consumer.sequence import Position
from consumer.stream.records import Record

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
CODECS: list[CodecName] = list(available())


def _runs(lines: list[bytes], codec: CodecName, level: int, chunk: int) -> list[LandedRun]:
    batcher = Batcher("shard-1", 7, 1 << 40, 60.0, level, codec=codec, chunk=chunk)
    runs = []
    for seq, line in enumerate(lines, 1):
        closed = batcher.add(Record("shard-1", Position(seq), "pk", b"{}", T0), line, now=0.0)
        if closed is not None:
            runs.append(closed)
    last = batcher.close()
    return [*runs, last] if last is not None else runs


async def _land(store: ObjectStore, runs: list[LandedRun]) -> list[PutOutcome]:
    return [
        await store.put_if_absent(
            f"k/{run.first.sequence}-{run.last.sequence}",
            run.body,
            {CONTENT_DIGEST: run.content_sha256},
        )
        for run in runs
    ]


workers = st.tuples(st.sampled_from(CODECS), st.integers(1, 9), st.integers(1, 96 * 1024))


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40_000), min_size=1, max_size=25),
    first=workers,
    second=workers,
    backend=st.sampled_from(["memory", "file"]),
)
def test_two_workers_with_any_codecs_and_chunks_see_replays_never_conflicts(
    lines: list[bytes],
    first: tuple[CodecName, int, int],
    second: tuple[CodecName, int, int],
    backend: str,
) -> None:
    """Both workers cut the same runs (cuts read only the records); their bodies may
    differ, their content digests do not; every second put is a replay, and the
    archive keeps the first body, which holds exactly the lines."""
    a, b = _runs(lines, *first), _runs(lines, *second)
    assert [(r.first, r.last, r.content_sha256) for r in a] == [
        (r.first, r.last, r.content_sha256) for r in b
    ]
    with tempfile.TemporaryDirectory() as folder:
        store: ObjectStore = (
            MemoryObjectStore() if backend == "memory" else FileObjectStore(Path(folder))
        )
        assert set(asyncio.run(_land(store, a))) == {PutOutcome.CREATED}
        assert set(asyncio.run(_land(store, b))) == {PutOutcome.REPLAYED}
        for run in a:
            body = asyncio.run(store.get(f"k/{run.first.sequence}-{run.last.sequence}"))
            assert body == run.body
            assert sha256(gzip.decompress(body)) == run.content_sha256


@pytest.mark.skipif("isal" not in CODECS, reason="the isal wheel is not installed")
def test_isal_and_zlib_bodies_differ_but_hold_the_same_lines() -> None:
    """The case the digest exists for: the bytes differ, the content does not."""
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i % 50)) for i in range(2000))
    zlib_body, isal_body = gzip_bytes(data, 1, "zlib"), gzip_bytes(data, 1, "isal")
    assert zlib_body != isal_body
    assert gzip.decompress(isal_body) == data
    assert content_digest(zlib_body) == content_digest(isal_body) == sha256(data)


@pytest.mark.parametrize("backend", ["memory", "file"])
async def test_other_lines_under_the_same_key_are_a_conflict(backend: str, tmp_path: Path) -> None:
    """Another content is a conflict whatever the codec; the first object is kept."""
    store: ObjectStore = (
        MemoryObjectStore() if backend == "memory" else FileObjectStore(tmp_path / "a")
    )
    one, two = b'{"a": 1}\n', b'{"a": 2}\n'
    first = gzip_bytes(one, 1, CODECS[-1])
    assert await store.put_if_absent("k", first, {CONTENT_DIGEST: sha256(one)}) == (
        PutOutcome.CREATED
    )
    body = gzip_bytes(two, 6, CODECS[0])
    assert await store.put_if_absent("k", body, {CONTENT_DIGEST: sha256(two)}) == (
        PutOutcome.CONFLICT
    )
    # Without a stated digest the body's own content is digested.
    assert await store.put_if_absent("k", gzip_bytes(one, 9), {}) == PutOutcome.REPLAYED
    assert await store.get("k") == first


def test_a_damaged_body_is_its_own_bytes() -> None:
    """A truncated gzip body is not read as its surviving lines: only the very same
    bytes replay it."""
    body = gzip_bytes(b'{"a": 1}\n' * 100)
    assert content_digest(body[:-4]) == sha256(body[:-4])
    assert content_digest(b"plain") == sha256(b"plain")
