"""The compaction's object reader: the text reader's lines, and stricter about gzip.

The Java function (sparkjobs/compaction/jvm/LandedObjectLines.java) is called through Spark SQL on
objects built here byte by byte: gzip members with every optional header field, split
anywhere, lines ended by LF, CR or CRLF (what Hadoop's line reader splits on, and
``bytes.splitlines``). Every damaged object it is given must fail it exactly where
:func:`consumer.archive.codec.check_object` says the object is not sound. Then a whole
production-like archive (bench/prodlike.py, damaged objects included) is compacted with
each reader and must publish the same rows and the same manifest counts.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.prodlike import DAY, STREAM, generate
from consumer import cli
from consumer.archive.codec import check_object
from sparkjobs.catalog import table_ref
from sparkjobs.cli import BAD_CONFIG
from sparkjobs.compaction import counters, objectreader
from sparkjobs.compaction.compact import reader_for
from sparkjobs.session import cache_dir, with_object_reader
from sparkjobs.table.compacted import current_files
from sparkjobs.window import Window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkjobs.compaction.plan import WindowPlan
    from sparkjobs.table.publish import InputFile

FNAME, FCOMMENT, FEXTRA, FHCRC = 8, 16, 4, 2


def member(body: bytes, *, flags: int = 0, level: int = 1) -> bytes:
    """One gzip member of ``body`` with the optional header fields ``flags`` asks for."""
    head = struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, flags, 0, 0, 255)
    if flags & FEXTRA:
        head += struct.pack("<H", 4) + b"ab\x02\x00"
    if flags & FNAME:
        head += b"name.jsonl\x00"
    if flags & FCOMMENT:
        head += b"a comment\x00"
    if flags & FHCRC:
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = deflate.compress(body) + deflate.flush()
    return head + data + struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF)


def read(spark: SparkSession, objects: list[bytes]) -> list[list[bytes]]:
    """Each object's lines, by the reader, in one query (no Python worker)."""
    assert objectreader.enable(spark), "the test session has no object reader"
    values = ", ".join(f"({i}, unhex('{o.hex()}'))" for i, o in enumerate(objects))
    rows = spark.sql(
        f"SELECT i, {objectreader.FUNCTION}(o) AS lines FROM VALUES {values} AS t(i, o) ORDER BY i"
    ).collect()
    return [[bytes(line) for line in row["lines"]] for row in rows]


LINE = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"n").replace(b"\r", b"r"))
ENDS = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def objects(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(gzip object, its decoded text): lines with mixed endings, maybe no final one,
    cut into one to three members at arbitrary bytes, each with its own header."""
    lines = draw(st.lists(st.tuples(LINE, ENDS), max_size=12))
    text = b"".join(line + end for line, end in lines)
    if draw(st.booleans()):
        text += draw(LINE)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=2)))
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    flags = st.sampled_from([0, FNAME, FCOMMENT | FEXTRA, FHCRC | FNAME | FEXTRA])
    body = b"".join(
        member(p, flags=draw(flags), level=draw(st.sampled_from([0, 1, 9]))) for p in parts
    )
    return body, text


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(objects(), min_size=1, max_size=20))
def test_lines_are_the_text_readers_lines(
    spark: SparkSession, made: list[tuple[bytes, bytes]]
) -> None:
    """Any sound object gives the lines LF, CR and CRLF end, bytes as written."""
    got = read(spark, [body for body, _ in made])
    assert got == [text.splitlines() for _, text in made]


def test_line_endings_across_the_inflate_chunks(spark: SparkSession) -> None:
    """A CRLF or a line that straddles the 64 KiB pieces the reader inflates in."""
    texts = [b"x" * n + b"\r\n" + b"y" * 3 + b"\r\n" + b"z" for n in range(65530, 65540)]
    texts.append(b"a\n" + b"b" * 200_000 + b"\n\n\r\rc")
    assert read(spark, [member(t, level=0) for t in texts]) == [t.splitlines() for t in texts]


def damaged() -> dict[str, bytes]:
    """Objects that are not sound gzip, each as a writer or a disk could leave it."""
    text = b"".join(b'{"n":%d}\n' % n for n in range(500))
    sound = member(text, flags=FNAME)
    crc_at = len(sound) - 8
    return {
        "empty": b"",
        "plain lines": text,
        "truncated in the data": sound[: len(sound) // 2],
        "truncated in the trailer": sound[:-3],
        "truncated in the header": sound[:6],
        "a flipped data byte": sound[:40] + bytes([sound[40] ^ 0xFF]) + sound[41:],
        "a wrong CRC-32": sound[:crc_at] + bytes([sound[crc_at] ^ 1]) + sound[crc_at + 1 :],
        "a wrong length": sound[:-1] + bytes([sound[-1] ^ 1]),
        "junk after the stream": sound + b"junk",
        "a truncated second member": sound + member(b"tail\n")[:12],
        "an unknown method": sound[:2] + b"\x07" + sound[3:],
    }


@pytest.mark.parametrize("name", sorted(damaged()))
def test_damage_fails_the_read_where_the_check_finds_it(spark: SparkSession, name: str) -> None:
    """What check_object calls truncated or corrupt, the reader refuses to decode."""
    body = damaged()[name]
    assert check_object(body).status != "ok"
    with pytest.raises(Exception, match=r"gzip|empty object|junk"):
        read(spark, [body])


def _compact(
    monkeypatch: pytest.MonkeyPatch, archive: Path, output: Path, **env: str
) -> dict[str, Any]:
    """``lander compact`` of the archive's day in this process; the run's manifest. It
    exits 4 when the run reported bad input, else 0."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("sparkjobs.cli.configure_logging", lambda *_, **__: None)
    argv = ["compact", "--stream", STREAM, "--archive", archive.as_uri()]
    argv += ["--compacted", output.as_uri(), "--window", DAY.isoformat()]
    code = cli.main(argv)
    (found,) = (output / "_manifests" / f"stream={STREAM}").glob("*.json")
    manifest = dict(json.loads(found.read_text()))
    assert code == (4 if manifest["bad_files"] else 0)
    return manifest


def _published(output: Path) -> list[tuple[Any, ...]]:
    files = [
        uri.removeprefix("file://")
        for uri in current_files(table_ref(output.as_uri(), STREAM), Window.parse(DAY.isoformat()))
    ]
    query = (
        "SELECT shard_id, sequence_number, subsequence_number, partition_key, arrival_ts::VARCHAR, "
        f"event_id, data FROM read_parquet({files}) ORDER BY ALL"
    )
    return duckdb.execute(query).fetchall()


@pytest.mark.deep  # ~14 s: the Spark matrix (the jar and the text reader)
def test_both_readers_publish_the_same_archive(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A production-like day with truncated and corrupt objects: the object reader
    fails the fast path as the text reader does, and both publish the same rows, counts
    and bad files. The object reader's run splits lines with the jar's header function
    and counts with its aggregate, the text reader's with ``from_json`` and Spark's
    counters alone."""
    archive = tmp_path / "archive"
    made = generate(archive, "small", seed=5)
    assert made.truncated
    assert made.corrupt
    headers: list[bool] = []

    def header(spark: SparkSession) -> bool:
        headers.append(real(spark))
        return headers[-1]

    real = objectreader.enable_header
    monkeypatch.setattr(objectreader, "enable_header", header)
    whole = _compact(monkeypatch, archive, tmp_path / "whole")
    assert headers == [True]
    assert counters.enable(spark), "the object reader's run counts with the jar's aggregate"
    monkeypatch.setattr(objectreader, "enable", lambda _spark: False)
    monkeypatch.setattr(objectreader, "enable_header", lambda _spark: False)
    monkeypatch.setattr(counters, "enable", lambda _spark: False)
    text = _compact(monkeypatch, archive, tmp_path / "text")
    assert (whole["reader"], text["reader"]) == (objectreader.WHOLE, objectreader.TEXT)
    assert whole["totals"] == text["totals"]
    assert whole["totals"]["output_rows"] > 1000
    assert whole["bad_files"] == text["bad_files"]
    assert len(whole["bad_files"]) >= len(made.truncated) + len(made.corrupt)
    assert whole["hours"] == text["hours"]
    assert _published(tmp_path / "whole") == _published(tmp_path / "text")


def test_by_path_reads_what_the_listing_names_and_nothing_else(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The by-path function reads an object at its listed size; an object that is gone,
    or not that size any more, fails the read with its path."""
    assert objectreader.enable_by_path(spark), "the test session has no by-path reader"
    body = member(b"a\nb\r\nc", flags=FNAME) + member(b"\nd\n")
    (tmp_path / "o.jsonl.gz").write_bytes(body)
    uri = (tmp_path / "o.jsonl.gz").as_uri()

    def lines(path: str, size: int) -> list[bytes]:
        query = f"SELECT {objectreader.BY_PATH}('{path}', {size}L) AS lines"
        return [bytes(line) for line in spark.sql(query).collect()[0]["lines"]]

    assert lines(uri, len(body)) == [b"a", b"b", b"c", b"d"]
    for size, why in ((len(body) - 1, "longer than"), (len(body) + 1, "shorter than")):
        with pytest.raises(Exception, match=f"o.jsonl.gz: {why} the {size} bytes listed"):
            lines(uri, size)
    with pytest.raises(Exception, match=r"gone\.jsonl\.gz"):
        lines((tmp_path / "gone.jsonl.gz").as_uri(), 10)
    # A local object is read past Hadoop's filesystem, at the path Hadoop would read:
    # the job joins the archive's URI and the key as text, not percent-encoded.
    odd = tmp_path / "a b%20c" / "o.jsonl.gz"
    odd.parent.mkdir()
    odd.write_bytes(body)
    assert lines(f"file://{odd}", len(body)) == [b"a", b"b", b"c", b"d"]


@pytest.mark.deep  # ~11 s: the Spark matrix (by path and by folder)
def test_a_clean_archive_is_read_by_path_with_the_same_rows(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sound day is read from the run's listing, by path, and publishes what reading
    the listed folders publishes; an object that changed since the listing fails the
    fast path, and the checked read that follows publishes the same rows again."""
    archive = tmp_path / "archive"
    generate(archive, "small", seed=7, damaged=False)
    calls: list[int] = []
    real = objectreader.listed_objects

    def spy(spark: SparkSession, source: str, files: list[InputFile]) -> Any:
        calls.append(len(files))
        return real(spark, source, files)

    monkeypatch.setattr("sparkjobs.compaction.sparkplan.listed_objects", spy)
    by_path = _compact(monkeypatch, archive, tmp_path / "by-path")
    assert len(calls) == 1
    assert calls[0] > 100
    assert by_path["bad_files"] == []

    def resized(spark: SparkSession, source: str, files: list[InputFile]) -> Any:
        calls.append(len(files))  # as if the first object were rewritten since
        first = replace(files[0], size=files[0].size + 1)
        return real(spark, source, [first, *files[1:]])

    monkeypatch.setattr("sparkjobs.compaction.sparkplan.listed_objects", resized)
    checked = _compact(monkeypatch, archive, tmp_path / "checked")
    assert len(calls) == 2  # once, then the checked read lists the folders
    assert "check_s" in checked["timings"]
    assert "check_s" not in by_path["timings"]
    monkeypatch.setattr(objectreader, "enable_by_path", lambda _spark: False)
    folders = _compact(monkeypatch, archive, tmp_path / "folders")
    assert len(calls) == 2
    assert by_path["reader"] == folders["reader"] == objectreader.WHOLE
    for other in (checked, folders):
        assert by_path["totals"] == other["totals"]
        assert by_path["hours"] == other["hours"]
    assert by_path["totals"]["output_rows"] > 1000
    expected = _published(tmp_path / "folders")
    assert _published(tmp_path / "by-path") == expected
    assert _published(tmp_path / "checked") == expected


def test_a_bad_reader_jar_setting_is_one_line_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LANDER_SPARK_READER_JAR naming no file refuses the run before any Spark."""
    monkeypatch.setenv(objectreader.ENV, str(tmp_path / "missing.jar"))
    argv = ["compact", "--stream", STREAM, "--archive", tmp_path.as_uri()]
    argv += ["--compacted", (tmp_path / "out").as_uri(), "--window", DAY.isoformat()]
    assert cli.main(argv) == BAD_CONFIG
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [
        f"lander: {objectreader.ENV}: no such file: {tmp_path / 'missing.jar'} "
        "(a jar, or off for Spark's text reader)"
    ]


@pytest.mark.processes  # runs javac
def test_the_jar_is_built_once_into_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Unset, the jar is compiled into the cache under the source's hash, then reused."""
    if objectreader.javac() is None:
        pytest.skip("no javac on this machine")
    monkeypatch.delenv(objectreader.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    jar = objectreader.reader_jar(cache_dir())
    assert jar is not None
    assert jar.parent == tmp_path / "kinesis-lander"
    assert jar.name.startswith("object-reader-")
    with zipfile.ZipFile(jar) as built:
        assert "kinesislander/spark/LandedObjectLines.class" in built.namelist()
        assert "kinesislander/spark/LandedObjectLines$FromPath.class" in built.namelist()
    made = jar.stat().st_mtime_ns
    assert objectreader.reader_jar(cache_dir()) == jar
    assert jar.stat().st_mtime_ns == made
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no temporary left


def test_without_javac_or_when_off_the_text_reader_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(objectreader.ENV, raising=False)
    monkeypatch.setattr(objectreader, "javac", lambda: None)
    assert objectreader.reader_jar(cache_dir()) is None
    monkeypatch.setenv(objectreader.ENV, "OFF")
    assert objectreader.reader_jar(cache_dir()) is None
    assert with_object_reader("a.jar, b.jar") == "a.jar, b.jar"


def test_a_named_jar_joins_the_sessions_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    named = tmp_path / "reader.jar"
    named.write_bytes(b"PK")
    monkeypatch.setenv(objectreader.ENV, str(named))
    assert objectreader.reader_jar(cache_dir()) == named
    assert with_object_reader("a.jar, b.jar") == f"a.jar,b.jar,{named}"
    assert with_object_reader("") == str(named)


@pytest.mark.processes  # runs javac
def test_a_compiler_that_fails_leaves_the_text_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A broken javac is logged, and the session starts without the reader."""
    fake = tmp_path / "bin" / "javac"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'error: no compiler here' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(objectreader.ENV, raising=False)
    monkeypatch.setattr(objectreader, "javac", lambda: str(fake))
    with pytest.raises(RuntimeError, match="no compiler here"):
        objectreader.reader_jar(cache_dir())
    assert with_object_reader("a.jar") == "a.jar"


@pytest.mark.parametrize(
    ("largest", "loadable", "reader"),
    [
        (objectreader.WHOLE_OBJECT_MAX_BYTES, True, objectreader.WHOLE),
        (objectreader.WHOLE_OBJECT_MAX_BYTES + 1, True, objectreader.TEXT),
        (1, False, objectreader.TEXT),
    ],
)
def test_a_run_reads_whole_objects_only_when_it_can_hold_them(
    monkeypatch: pytest.MonkeyPatch, largest: int, loadable: bool, reader: str
) -> None:
    """The text reader streams: a run with a large object, or without the jar, uses it."""
    monkeypatch.setattr(objectreader, "enable", lambda _spark: loadable)
    sizes = {"a": SimpleNamespace(size=1), "b": SimpleNamespace(size=largest)}
    plan = cast("WindowPlan", SimpleNamespace(read=sizes))
    assert reader_for(cast("SparkSession", None), plan) == reader
