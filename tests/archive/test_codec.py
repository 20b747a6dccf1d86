"""The codec of landed objects (consumer/archive/codec.py) and everything held to it:
the lander's fast compressors, the key layout, the folder reader, the integrity check."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.archive import codec, layout, reader
from consumer.archive.envelope import encode_line
from consumer.archive.sample import write_sample
from consumer.landing.deflate import CodecName, available, gzip_bytes, gzip_stream
from consumer.sequence import Position

LINES = st.lists(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ") + b"\n"))


@given(lines=LINES, level=st.integers(min_value=1, max_value=9))
def test_the_landers_zlib_compressor_writes_the_codecs_bytes(
    lines: list[bytes], level: int
) -> None:
    """Same input, same level: the fast path's bytes are the codec's, byte for byte."""
    data = b"".join(lines)
    assert gzip_bytes(data, level, "zlib") == codec.compress(data, level)
    assert codec.decompress(codec.compress(data, level)) == data
    assert codec.check_object(codec.compress(data, level)).status == "ok"


@pytest.mark.parametrize("name", available())
def test_every_compressor_writes_objects_the_codec_reads(name: CodecName) -> None:
    """isal's bytes differ from zlib's; what they hold, and how they start, do not."""
    data = b'{"a":1}\n' * 1000
    stream = gzip_stream(1, name)
    body = b"".join(stream.compress(data[i : i + 777]) for i in range(0, len(data), 777))
    body += stream.flush()
    assert codec.is_compressed(body)
    assert codec.decompress(body) == data
    assert codec.check_object(body).lines == 1000


def test_keys_end_in_the_suffix_and_match_the_glob() -> None:
    minute = datetime(2026, 11, 21, 9, 12, tzinfo=UTC)
    key = layout.object_key("p", "s", "shard-1", minute, first=Position(1, 0), last=Position(9, 3))
    name = PurePosixPath(key)
    assert key.endswith(codec.SUFFIX)
    assert name.match(codec.GLOB)
    assert PurePosixPath("s").joinpath(key.split("stream=s/")[1]).match(layout.hour_glob(minute))
    relative = layout.parse_relative(key)
    assert relative is not None
    assert len(relative.rel.split("/")) == layout.KEY_DEPTH
    assert layout.parse_key(key[: -len(codec.SUFFIX)] + ".jsonl.zst") is None


def test_the_folder_reader_opens_objects_with_the_codec(tmp_path: Path) -> None:
    minute = datetime(2026, 11, 21, 9, 12, tzinfo=UTC)
    line = encode_line(
        stream="s",
        shard_id="a",
        sequence_number=7,
        subsequence_number=0,
        partition_key="k",
        arrival_ts="2026-11-21T09:12:00.000Z",
        data=b'{"n":1}',
    )
    key = layout.object_key("", "s", "a", minute, first=Position(7, 0), last=Position(7, 0))
    (tmp_path / key).parent.mkdir(parents=True)
    (tmp_path / key).write_bytes(codec.compress(line * 2))
    (landed,) = reader.read_archive(tmp_path, "s")
    assert [line.data for line in landed.lines] == [b'{"n":1}', b'{"n":1}']
    assert gzip.decompress((tmp_path / key).read_bytes()) == line * 2  # plain gzip to anyone


def test_the_sample_object_is_a_landed_object(tmp_path: Path) -> None:
    """What the image's class-data archive and the compaction bench compact."""
    minute = datetime(2026, 1, 1, tzinfo=UTC)
    path = write_sample(tmp_path, "s", "a", minute)
    (landed,) = reader.read_archive(tmp_path, "s")
    assert landed.path == path
    assert [line.event_id for line in landed.lines] == ["e1", "e2", "e3"]
    assert landed.lines[0].arrival_ts == "2026-01-01T00:00:01.000Z"
