"""The Spark jobs' decisions, without Spark: gzip checks, windows, publishing."""

from __future__ import annotations

import gzip
import random
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.archive.codec import check_object, recover_lines
from consumer.archive.layout import parse_relative
from sparkjobs.io import LocalFilesystem
from sparkjobs.table.publish import (
    HourEntry,
    InputFile,
    entries_from_summaries,
    inputs_digest,
    stale_hours,
    summary_of,
    winning_hours,
)
from sparkjobs.window import Window, WindowError

lines_strategy = st.lists(
    st.text(alphabet=st.characters(blacklist_characters="\n\r", codec="utf-8"), max_size=60),
    min_size=0,
    max_size=40,
)


def _body(lines: list[str]) -> bytes:
    text = "".join(f"{line}\n" for line in lines).encode()
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    return compressor.compress(text) + compressor.flush()


@given(lines_strategy)
def test_a_whole_stream_is_ok_and_counts_its_lines(lines: list[str]) -> None:
    """A complete gzip stream is ``ok`` with one line per newline."""
    check = check_object(_body(lines))
    assert check.status == "ok"
    assert check.lines == len(lines)


@given(lines_strategy.filter(lambda x: len(x) > 0), st.data())
def test_a_cut_stream_is_never_ok_and_gives_back_a_prefix(
    lines: list[str], data: st.DataObject
) -> None:
    """Cut anywhere, a stream is not ``ok``; what is recovered is a prefix of its lines."""
    body = _body(lines)
    cut = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    check = check_object(body[:cut])
    assert check.status != "ok"
    if check.status == "truncated":
        recovered = recover_lines(body[:cut])
        # Blank means blank as bytes: str.strip() also strips "\x1f" and the like.
        expected = [line for line in lines if line.encode().strip()]
        assert recovered == expected[: len(recovered)]


@settings(max_examples=300)
@given(lines_strategy.filter(lambda x: len(x) > 2), st.data())
def test_ok_means_the_content_is_what_was_written(lines: list[str], data: st.DataObject) -> None:
    """Flip any byte: if the check still says ``ok``, the decoded content is unchanged."""
    body = bytearray(_body(lines))
    where = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    body[where] ^= data.draw(st.integers(min_value=1, max_value=255))
    if check_object(bytes(body)).status == "ok":
        assert gzip.decompress(bytes(body)) == "".join(f"{x}\n" for x in lines).encode()


def test_what_is_not_gzip_is_corrupt() -> None:
    """Plain bytes, an empty object and junk after the stream are corrupt, with a reason."""
    assert check_object(b"").status == "corrupt"
    assert check_object(b'{"stream": "s"}\n').reason == "not gzip"
    junk = check_object(_body(["a"]) + b"trailing junk")
    assert (junk.status, junk.lines) == ("corrupt", 1)
    assert "junk" in junk.reason


def test_concatenated_members_are_one_stream() -> None:
    """Two gzip members back to back (as ``cat`` makes them) are read as one object."""
    check = check_object(_body(["a", "b"]) + _body(["c"]))
    assert (check.status, check.lines) == ("ok", 3)


def test_windows_parse_and_name_their_hours() -> None:
    """A day has 24 hours, an hour one; anything else is an error naming the format."""
    day = Window.parse("2026-11-22")
    assert (day.hours, day.label) == (24, "2026-11-22")
    hour = Window.parse("2026-11-22T05")
    assert hour.hour_starts() == [datetime(2026, 11, 22, 5, tzinfo=UTC)]
    assert hour.label == "2026-11-22T05"
    assert hour.end == datetime(2026, 11, 22, 6, tzinfo=UTC)
    for bad in ("2026-11", "2026-11-31", "2026-11-22T24", "yesterday"):
        with pytest.raises(WindowError):
            Window.parse(bad)


def test_landed_paths_parse_from_any_scheme() -> None:
    """The relative key is the same whatever the scheme or root; other files are not landed."""
    rel = "dt=2026-11-22/hour=05/minute=07/shard=shardId-000000000001/12-15.7.jsonl.gz"
    for root in ("file:/x/stream=s/", "file:///x/stream=s/", "s3a://b/p/stream=s/"):
        found = parse_relative(root + rel)
        assert found is not None
        assert found.rel == rel
        assert found.hour == datetime(2026, 11, 22, 5, tzinfo=UTC)
    assert parse_relative("s3a://b/p/stream=s/dt=2026-11-22/hour=05/_SUCCESS") is None


def _entry(hour: str, listed_at: str, run: str, digest: str = "d") -> HourEntry:
    return HourEntry(hour, run, listed_at, digest, 1, 1)


HOURS = ["2026-11-22T00", "2026-11-22T01", "2026-11-22T02"]
runs = st.lists(
    st.tuples(
        st.sampled_from(["2026-11-23T03:00:00", "2026-11-23T04:00:00", "2026-11-23T05:00:00"]),
        st.lists(st.sampled_from(HOURS), min_size=1, max_size=3, unique=True),
    ),
    max_size=6,
)


@given(runs, st.randoms())
def test_racing_runs_leave_every_hour_from_the_newest_listing(
    made: list[tuple[str, list[str]]], rnd: random.Random
) -> None:
    """Runs commit in any order, each keeping only the hours it still wins against what
    the table's snapshots say: every hour ends with the entry of the newest listing."""
    entries = [
        {hour: _entry(hour, listed_at, f"r{i}") for hour in hours}
        for i, (listed_at, hours) in enumerate(made)
    ]
    history: list[dict[str, str]] = []  # snapshot summaries, oldest first
    order = list(range(len(entries)))
    rnd.shuffle(order)
    for i in order:
        current = entries_from_summaries(reversed(history))
        wins = winning_hours(entries[i], current)
        history.append(summary_of(f"r{i}", [entries[i][hour] for hour in wins]))
    final = entries_from_summaries(reversed(history))
    for hour in HOURS:
        rivals = [e[hour] for e in entries if hour in e]
        if rivals:
            newest = max(rivals, key=lambda e: (e.listed_at, e.run_id))
            assert final[hour] == newest
        else:
            assert hour not in final


def test_an_hour_entry_is_read_back_from_the_summary_and_noise_is_skipped() -> None:
    """The newest summary naming an hour wins; other writers' properties, entries that do
    not parse and hours not asked for are left out."""
    new, old = _entry("2026-11-22T01", "t2", "r2"), _entry("2026-11-22T01", "t1", "r1")
    other = _entry("2026-11-22T02", "t1", "r1")
    summaries = [
        {"spark.app.id": "x", "lander.hour.2026-11-22T00": "{not json"},
        summary_of("r2", [new]),
        summary_of("r1", [old, other]),
    ]
    found = entries_from_summaries(summaries)
    assert found == {"2026-11-22T01": new, "2026-11-22T02": other}
    assert entries_from_summaries(summaries, ["2026-11-22T02"]) == {"2026-11-22T02": other}
    key, value = new.to_summary()
    assert HourEntry.from_summary(key, value) == new
    with pytest.raises(ValueError, match="not an hour entry"):
        HourEntry.from_summary("lander.run-id", value)


def test_only_hours_whose_inputs_changed_are_stale() -> None:
    """A late file (or a bigger one) makes its hour stale; the others stay published."""
    a = InputFile("dt=2026-11-22/hour=00/minute=00/shard=a/1-2.jsonl.gz", 10, 1)
    b = InputFile("dt=2026-11-22/hour=01/minute=00/shard=a/3-4.jsonl.gz", 10, 1)
    current = {
        "2026-11-22T00": _entry("2026-11-22T00", "t", "r", inputs_digest([a])),
        "2026-11-22T01": _entry("2026-11-22T01", "t", "r", inputs_digest([b])),
    }
    late = InputFile("dt=2026-11-22/hour=01/minute=30/shard=a/5-6.jsonl.gz", 10, 2)
    digests = {
        "2026-11-22T00": inputs_digest([a]),
        "2026-11-22T01": inputs_digest([b, late]),
        "2026-11-22T02": inputs_digest([]),
    }
    assert stale_hours(current, digests) == ["2026-11-22T01", "2026-11-22T02"]
    assert inputs_digest([a]) == inputs_digest([InputFile(a.rel, a.size, 99)])
    assert inputs_digest([a]) != inputs_digest([InputFile(a.rel, 11, 1)])


def test_local_listing_walks_every_folder_and_skips_hidden_names(tmp_path: Path) -> None:
    """What Spark would read: nested files with size and mtime; names starting with a dot
    or an underscore skipped, files and folders alike; a link to a folder not followed."""
    (tmp_path / "dt=2026-11-21" / "hour=00" / "minute=05").mkdir(parents=True)
    kept = tmp_path / "dt=2026-11-21" / "hour=00" / "minute=05" / "a.jsonl.gz"
    kept.write_bytes(b"12345")
    (tmp_path / "top.jsonl.gz").write_bytes(b"1")
    (tmp_path / "dt=2026-11-21" / ".a.jsonl.gz.crc").write_bytes(b"x")
    (tmp_path / "dt=2026-11-21" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / "_temporary" / "0" / "part.jsonl.gz").write_bytes(b"x")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "b.jsonl.gz").write_bytes(b"x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "c.jsonl.gz").write_bytes(b"x")
    (tmp_path / "linked").symlink_to(outside, target_is_directory=True)

    found = LocalFilesystem().list_files(f"file://{tmp_path}")

    assert sorted(item.uri for item in found) == sorted(
        [f"file://{kept}", f"file://{tmp_path / 'top.jsonl.gz'}"]
    )
    (item,) = [i for i in found if i.uri.endswith("a.jsonl.gz")]
    assert item.size == 5
    assert item.modified_ms == kept.stat().st_mtime_ns // 1_000_000
    assert LocalFilesystem().list_files(f"file://{tmp_path / 'missing'}") == []
