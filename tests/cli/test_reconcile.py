"""The demo's reconciliation in-process: each check fails on the count it watches, and
the closing page says FAILED then (the demo test sees only the run where all agree)."""

from __future__ import annotations

import gzip
import io
from collections import Counter
from pathlib import Path

from consumer.cli.harness import Say
from consumer.cli.produce import Landmark, Produced
from consumer.cli.reconcile import ArchiveView, Check, read_archive, reconcile, summary


def _produced() -> Produced:
    marks = [
        Landmark("shard-0", "1", 0, "e1", bad=False),
        Landmark("shard-0", "2", 0, "e2", bad=False),
        Landmark("shard-0", "3", 0, "e1", bad=False),  # a producer retry of e1
        Landmark("shard-1", "4", 0, None, bad=True),
    ]
    return Produced(events=2, retries=1, bad=1, landmarks=marks)


def _view(produced: Produced, copies: int = 0) -> ArchiveView:
    view = ArchiveView()
    for place in produced.places():
        view.landed[place] += 1
    for place in list(produced.places())[:copies]:
        view.landed[place] += 1
    for place in produced.places(bad=True):
        view.dead[place] += 1
    view.files, view.days = 2, {"2026-11-28"}
    return view


def _failed(checks: list[Check]) -> list[str]:
    return [check.what for check in checks if not check.ok]


def test_every_check_passes_when_the_counts_agree() -> None:
    produced = _produced()
    view = _view(produced, copies=1)
    assert view.raw_duplicates == 1
    checks = reconcile(produced, view, transport=1, producer_dups=1, rows=2, distinct=2, lost=0)
    assert _failed(checks) == []


def test_each_check_fails_on_the_count_it_watches() -> None:
    produced = _produced()
    view = _view(produced)
    view.landed[("shard-9", "9", 0)] += 1  # a record nobody produced
    del view.dead[("shard-1", "4", 0)]  # a bad payload not dead-lettered
    checks = reconcile(produced, view, transport=1, producer_dups=0, rows=2, distinct=1, lost=1)
    assert _failed(checks) == [
        "every produced record landed",
        "bad payloads dead-lettered",
        "raw copies removed as transport duplicates",
        "producer retries removed",
        "one row per event id",
    ]
    assert "1 unexpected" in checks[0].detail


def test_the_closing_page_says_failed_and_names_each_check(tmp_path: Path) -> None:
    produced = _produced()
    view = _view(produced)
    checks = reconcile(produced, view, transport=0, producer_dups=0, rows=2, distinct=2, lost=0)
    out = io.StringIO()
    summary(
        produced,
        view,
        checks,
        chaos=[],
        metrics=Counter({"records landed": 3}),
        report="",
        workdir=tmp_path,
        lost=0,
        table=("lander.demo", "file:///m/00001.metadata.json"),
        say=Say(out),
    )
    page = out.getvalue()
    assert "kinesis-lander demo: FAILED" in page
    assert "  chaos      none" in page
    assert "  report     -" in page
    assert "[FAIL] producer retries removed: 1 retries, 0 removed" in page
    assert "[ok] every produced record landed" in page
    [query] = [line for line in page.splitlines() if line.startswith("  query it ")]
    assert 'load_table("lander.demo")' in query
    assert f"sqlite:///{(tmp_path / 'compacted').resolve()}/catalog.db" in query


def test_the_archive_is_read_as_landed_copies_and_dead_letters(tmp_path: Path) -> None:
    from consumer.archive.layout import DEAD_LETTER, SUFFIX, stream_folder
    from tests.support.landed import STREAM, line, write_object

    first = line("shardId-0", 11, "2026-11-28T10:00:01.000Z", "e1", b"{}")
    second = line("shardId-0", 12, "2026-11-28T10:00:02.000Z", "e2", b"{}")
    write_object(tmp_path, "2026-11-28T10:00", "shardId-0", [first, second])
    write_object(tmp_path, "2026-11-28T10:01", "shardId-0", [second])  # a raw copy
    dead = tmp_path / DEAD_LETTER / stream_folder(STREAM) / f"x{SUFFIX}"
    dead.parent.mkdir(parents=True)
    letter = b'{"shard_id":"shardId-1","sequence_number":"7","subsequence_number":0}\n'
    dead.write_bytes(gzip.compress(letter))
    view = read_archive(tmp_path, STREAM)
    assert view.files == 2
    assert view.days == {"2026-11-28"}
    assert view.landed == Counter({("shardId-0", "11", 0): 1, ("shardId-0", "12", 0): 2})
    assert view.raw_duplicates == 1
    assert (view.dead_files, view.dead) == (1, Counter({("shardId-1", "7", 0): 1}))
