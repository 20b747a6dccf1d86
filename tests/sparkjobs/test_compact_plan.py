"""Compaction planning without Spark: listings, lookback, stale hours, the fallback's triage.

Everything here runs on an in-memory listing (no JVM, no pyspark import):
:mod:`sparkjobs.compaction.plan` decides which hours a run rewrites and which objects it reads,
:mod:`sparkjobs.compaction.fallback` sorts checked objects into read, saved and reported.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sparkjobs.compaction.fallback import VANISHED, triage
from sparkjobs.compaction.job import CompactJob
from sparkjobs.compaction.plan import (
    WindowPlan,
    _inputs_and_digests,
    _OwnDigests,
    files_per_hour,
    hour_label_of,
    inputs_of,
    list_inputs,
    listed_hours,
    partitions_for,
    plan_window,
)
from sparkjobs.io import Listed
from sparkjobs.table.publish import HourEntry, InputFile, inputs_digest
from sparkjobs.window import Window, hour_label, parse_hour

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = "mem://archive"
SOURCE = f"{ARCHIVE}/stream=orders"
DAY = datetime(2026, 11, 21, tzinfo=UTC)


def _rel(hour: datetime, minute: int, name: str, shard: int = 0) -> str:
    return (
        f"dt={hour:%Y-%m-%d}/hour={hour:%H}/minute={minute:02d}"
        f"/shard=shardId-{shard:012d}/{name}.jsonl.gz"
    )


class ListingOnly:
    """A filesystem that only lists: the objects given, by URI prefix."""

    def __init__(self, files: Iterable[InputFile], extra: Iterable[str] = ()) -> None:
        self.items = [Listed(f"{SOURCE}/{f.rel}", f.size, f.modified_ms) for f in files]
        self.items += [Listed(f"{SOURCE}/{rel}", 1, 1) for rel in extra]

    def list_files(self, uri: str) -> list[Listed]:
        return [i for i in self.items if i.uri.startswith(uri.rstrip("/") + "/")]

    def read(self, uri: str) -> bytes | None:
        raise AssertionError(f"planning must only list, not read {uri}")

    def write_atomic(self, uri: str, data: bytes) -> None:
        raise AssertionError(f"planning must only list, not write {uri}")

    def delete(self, uri: str) -> None:
        raise AssertionError(f"planning must only list, not delete {uri}")

    def move(self, source: str, target: str) -> None:
        raise AssertionError(f"planning must only list, not move {source}")

    def remove_leftovers(self, uri: str) -> int:
        raise AssertionError(f"planning must only list, not remove {uri}")


def _job(window: str, lookback: int = 10) -> CompactJob:
    return CompactJob(
        ARCHIVE, "orders", Window.parse(window), "mem://out", horizon_minutes=lookback
    )


def _plan(
    job: CompactJob, files: Iterable[InputFile], current: dict[str, HourEntry] | None = None
) -> WindowPlan:
    return plan_window(job, list_inputs(ListingOnly(files), job), current or {})


def _published(plan: WindowPlan, run: str = "r1") -> dict[str, HourEntry]:
    """The entries a run of ``plan`` publishes for its stale hours (no files needed here)."""
    return {
        hour: HourEntry(
            hour, run, "2026-11-22T01:00:00", plan.digests[hour], len(plan.inputs[hour]), 0
        )
        for hour in plan.stale
    }


def test_the_lookback_reaches_into_the_hour_and_day_before() -> None:
    """An hour is listed with the hour its lookback reaches; a day with the day before's last."""
    first = datetime(2026, 11, 21, 0, tzinfo=UTC)
    assert listed_hours(Window.parse("2026-11-21T00"), 10) == [first - timedelta(hours=1), first]
    assert listed_hours(Window.parse("2026-11-21T00"), 0) == [first]
    day = listed_hours(Window.parse("2026-11-21"), 10)
    assert (len(day), day[0], day[-1]) == (25, first - timedelta(hours=1), DAY.replace(hour=23))


def test_the_listing_keeps_landed_objects_by_the_hour_their_key_names() -> None:
    """Markers, dead letters and other names in a folder are not inputs; sizes and
    mtimes come from the listing, and each hour's objects are sorted."""
    nine = DAY.replace(hour=9)
    late = InputFile(_rel(nine, 30, "5-6"), 70, 2_000)
    early = InputFile(_rel(nine, 1, "1-2"), 50, 1_000)
    other = InputFile(_rel(DAY.replace(hour=10), 0, "7-8"), 10, 3_000)
    junk = ["dt=2026-11-21/hour=09/_SUCCESS", "dt=2026-11-21/hour=09/minute=01/notes.txt"]
    fs = ListingOnly([late, early, other], extra=junk)
    found = list_inputs(fs, _job("2026-11-21T09", lookback=0))
    assert found == {nine: [early, late]}
    with_lookback = list_inputs(fs, _job("2026-11-21T10", lookback=5))
    assert with_lookback == {nine: [early, late], DAY.replace(hour=10): [other]}


def test_an_hour_depends_on_its_own_objects_and_its_lookback_minutes() -> None:
    """Objects of the hour before count only in its last ``minutes`` minutes."""
    nine, ten = DAY.replace(hour=9), DAY.replace(hour=10)
    own = InputFile(_rel(ten, 0, "a"), 1, 1)
    in_lookback = InputFile(_rel(nine, 50, "b"), 1, 1)
    last_minute = InputFile(_rel(nine, 59, "c"), 1, 1)
    too_early = InputFile(_rel(nine, 49, "d"), 1, 1)
    by_hour = {nine: [too_early, in_lookback, last_minute], ten: [own]}
    assert inputs_of(ten, by_hour, 10) == [in_lookback, last_minute, own]
    assert inputs_of(ten, by_hour, 1) == [last_minute, own]
    assert inputs_of(ten, by_hour, 0) == [own]
    assert inputs_of(nine, by_hour, 10) == [too_early, in_lookback, last_minute]


def test_a_late_file_makes_its_hour_stale_and_the_next_one_whose_lookback_it_is_in() -> None:
    """After a run, a late object in 09:55 makes 09 and 10 stale (10's lookback holds
    it), one in 09:30 only 09; the rest of the day keeps its published entries."""
    job = _job("2026-11-21")
    files = [
        InputFile(_rel(DAY.replace(hour=h), m, f"{h}-{m}"), 10, 1) for h in (9, 10) for m in (5, 55)
    ]
    first = _plan(job, files)
    assert len(first.stale) == 24  # never compacted: every hour, empty ones too
    published = _published(first)
    assert _plan(job, files, published).stale == []

    in_lookback = InputFile(_rel(DAY.replace(hour=9), 55, "late"), 10, 2)
    again = _plan(job, [*files, in_lookback], published)
    assert again.stale == ["2026-11-21T09", "2026-11-21T10"]
    assert len(again.unchanged) == 22
    assert again.lookback_files == 0  # 09 is read whole anyway
    assert again.folders == [f"{SOURCE}/dt=2026-11-21/hour=09", f"{SOURCE}/dt=2026-11-21/hour=10"]

    not_in_lookback = InputFile(_rel(DAY.replace(hour=9), 30, "late"), 10, 2)
    assert _plan(job, [*files, not_in_lookback], published).stale == ["2026-11-21T09"]

    bigger = InputFile(files[0].rel, 11, 1)  # an object rewritten with more bytes
    assert _plan(job, [bigger, *files[1:]], published).stale == ["2026-11-21T09"]


def test_an_hour_run_reads_only_the_lookback_minute_folders_of_the_hour_before() -> None:
    """Rewriting 10 alone reads 10's folder and the minute folders of 09 its lookback
    needs, not all of 09; those objects are counted as lookback files."""
    nine, ten = DAY.replace(hour=9), DAY.replace(hour=10)
    files = [
        InputFile(_rel(nine, 10, "a"), 5, 1),
        InputFile(_rel(nine, 52, "b"), 6, 1),
        InputFile(_rel(nine, 58, "c", shard=1), 7, 1),
        InputFile(_rel(ten, 3, "d"), 8, 1),
    ]
    plan = _plan(_job("2026-11-21T10"), files)
    assert plan.stale == ["2026-11-21T10"]
    assert plan.own == {"2026-11-21T10": [files[3]]}
    assert sorted(plan.read) == sorted(f.rel for f in files[1:])
    assert plan.lookback_files == 2
    assert plan.folders == [
        f"{SOURCE}/dt=2026-11-21/hour=09/minute=52",
        f"{SOURCE}/dt=2026-11-21/hour=09/minute=58",
        f"{SOURCE}/dt=2026-11-21/hour=10",
    ]


HOURS = [DAY - timedelta(hours=1), DAY, *(DAY.replace(hour=h) for h in (8, 9, 10, 23))]
listings = st.lists(
    st.builds(
        lambda hour, minute, shard, size, n: InputFile(_rel(hour, minute, f"{n}", shard), size, n),
        st.sampled_from(HOURS),
        st.integers(0, 59),
        st.integers(0, 2),
        st.integers(1, 10_000),
        st.integers(0, 10**6),
    ),
    max_size=30,
    unique_by=lambda f: f.rel,
)
windows = st.sampled_from(["2026-11-21", "2026-11-21T00", "2026-11-21T09", "2026-11-21T10"])


@given(listings, windows, st.sampled_from([0, 1, 10, 59, 60, 61, 120, 600, 1440]))
def test_what_a_run_reads_is_exactly_what_lies_in_the_folders_it_reads(
    files: list[InputFile], window: str, lookback: int
) -> None:
    """Every object read lies in a folder read, every object there is read, and the
    objects read are the inputs of the stale hours."""
    job = _job(window, lookback)
    plan = _plan(job, files)
    under = {
        f.rel for f in files if any(f"{SOURCE}/{f.rel}".startswith(d + "/") for d in plan.folders)
    }
    assert set(plan.read) == under
    assert set(plan.read) == {f.rel for hour in plan.stale for f in plan.inputs[hour]}


@given(listings, windows, st.integers(0, 20), st.sampled_from(HOURS), st.integers(0, 59))
def test_replanning_the_same_listing_finds_nothing_stale_and_a_late_file_only_its_hours(
    files: list[InputFile], window: str, lookback: int, hour: datetime, minute: int
) -> None:
    """Once a run published its stale hours, the same listing plans no work; one more
    object makes stale exactly its hour and the next hour if it is in that one's lookback
    (both only if in the window)."""
    job = _job(window, lookback)
    published = _published(_plan(job, files))
    assert _plan(job, files, published).stale == []

    late = InputFile(_rel(hour, minute, "late", shard=9), 1, 1)
    in_window = {hour_label(h) for h in job.window.hour_starts()}
    expected = {hour_label(hour)}
    if minute >= 60 - lookback:
        expected.add(hour_label(hour + timedelta(hours=1)))
    assert _plan(job, [*files, late], published).stale == sorted(expected & in_window)


@given(
    listings,
    windows,
    st.sampled_from([0, 1, 10, 59, 60, 61, 120, 600, 1440]),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_the_window_s_inputs_and_digests_are_each_hour_s_taken_alone(
    files: list[InputFile], window: str, lookback: int, shuffle: bool, rng: random.Random
) -> None:
    """The window's inputs and digests, made in one pass from a listing in key order,
    are :func:`inputs_of` and :func:`inputs_digest` of each hour; a listing out of order
    (or with a key twice) takes the general way to the same result."""
    job = _job(window, lookback)
    since = [h - timedelta(minutes=lookback) for h in job.window.hour_starts()]
    edges = [  # an object on each horizon's first minute, and one a minute before it
        InputFile(_rel(at.replace(minute=0), at.minute, f"edge{i}", shard=7), 1, 1)
        for i, at in enumerate([*since, *(s - timedelta(minutes=1) for s in since)])
    ]
    by_hour = list_inputs(ListingOnly([*files, *edges]), job)
    if shuffle:
        by_hour = {hour: rng.sample(found, len(found)) for hour, found in by_hour.items()}
        if files:
            first = files[0]
            twin = InputFile(first.rel, first.size, first.modified_ms + 1)
            hour = parse_hour(hour_label_of(first.rel))
            by_hour[hour] = [*by_hour.get(hour, []), twin]
    starts = job.window.hour_starts()
    own = _OwnDigests(by_hour)
    inputs, digests = _inputs_and_digests(starts, by_hour, lookback, own)
    expected = {hour_label(h): inputs_of(h, by_hour, lookback) for h in starts}
    assert inputs == expected
    assert digests == {label: inputs_digest(found) for label, found in expected.items()}
    assert {own(h) for h in by_hour} == {inputs_digest(found) for found in by_hour.values()}
    if not shuffle:
        assert own.in_order


def test_a_later_window_lists_its_own_hours_again_and_takes_its_horizon_from_the_run() -> None:
    """Compacting two days in one run: the second day's horizon (the first day) is the
    listing the first day was compacted from; its own hours are listed when its turn
    comes, so a file landed since is in, and nothing is listed twice for it."""
    day2 = DAY + timedelta(days=1)
    files = [InputFile(_rel(DAY.replace(hour=h), 30, f"a{h}"), 5, 1) for h in range(24)]
    files += [InputFile(_rel(day2.replace(hour=h), 30, f"b{h}"), 5, 1) for h in range(24)]
    fs = ListingOnly(files)
    asked: list[str] = []
    listing = fs.list_files

    def counted(uri: str) -> list[Listed]:
        asked.append(uri)
        return listing(uri)

    fs.list_files = counted  # type: ignore[method-assign]
    first, second = _job("2026-11-21", 1440), _job("2026-11-22", 1440)
    known: dict[datetime, list[InputFile]] = {}
    known.update(list_inputs(fs, first, known))
    asked.clear()
    late_own = InputFile(_rel(day2.replace(hour=5), 31, "late-own"), 5, 2)
    late_horizon = InputFile(_rel(DAY.replace(hour=5), 31, "late-horizon"), 5, 2)
    fs.items += [Listed(f"{SOURCE}/{f.rel}", 5, 2) for f in (late_own, late_horizon)]

    by_hour = list_inputs(fs, second, known)
    assert len(asked) == 24  # the second day's hours only
    assert all("dt=2026-11-22" in uri for uri in asked)
    assert late_own in by_hour[day2.replace(hour=5)]
    assert late_horizon not in by_hour[DAY.replace(hour=5)]
    assert by_hour[DAY.replace(hour=5)] == known[DAY.replace(hour=5)]
    assert list_inputs(fs, second)[DAY.replace(hour=5)][-1] == late_horizon  # alone: listed


def test_partitions_fit_the_biggest_hour_and_every_core() -> None:
    """The biggest hour over the target size, rounded up; never fewer than the cores or 1."""
    mib = 1 << 20
    assert partitions_for(2, {"a": 1000 * mib, "b": mib}, 256 * mib) == 4
    assert partitions_for(8, {"a": 1000 * mib}, 256 * mib) == 8
    assert partitions_for(0, {}, 256 * mib) == 1


@given(
    st.dictionaries(st.text(min_size=1, max_size=3), st.integers(0, 10**12), max_size=30),
    st.integers(1, 10**10),
)
def test_each_hour_gets_the_fewest_files_that_keep_each_near_the_target(
    sizes: dict[str, int], target: int
) -> None:
    """One file for an hour up to the target; else the fewest that keep each (on
    average) within it. The dedupe has at least as many partitions as any hour files."""
    files = files_per_hour(sizes, target)
    assert files.keys() == sizes.keys()
    for hour, n in files.items():
        assert n >= 1
        assert sizes[hour] <= n * target
        assert n == 1 or sizes[hour] > (n - 1) * target
    assert partitions_for(2, sizes, target) >= max(files.values(), default=1)


def test_the_fallback_reads_sound_objects_saves_truncated_lines_and_reports_the_rest() -> None:
    """ok objects are read again; a truncated one's lines are kept, dated by its mtime;
    truncated, corrupt and vanished ones are reported, in key order."""
    hour = DAY.replace(hour=9)
    ok, cut, bad, gone = (InputFile(_rel(hour, 1, n), 9, 1_700_000_000_000) for n in "abcd")
    checks = {
        ok.rel: ("ok", 3, "", []),
        cut.rel: ("truncated", 2, "gzip stream ends early", ['{"x": 1}', '{"x": 2}']),
        bad.rel: ("corrupt", 0, "not gzip", []),
    }
    found = triage({f.rel: f for f in (gone, bad, cut, ok)}, checks)
    assert found.good == [ok.rel]
    when = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert found.saved == [(cut.rel, '{"x": 1}', when), (cut.rel, '{"x": 2}', when)]
    assert [(b.file, b.kind, b.lines, b.detail) for b in found.bad] == [
        (cut.rel, "truncated", 2, "gzip stream ends early"),
        (bad.rel, "corrupt", 0, "not gzip"),
        (gone.rel, *VANISHED[:3]),
    ]


def _module_imports(module: str) -> set[str]:
    """Modules ``module`` imports when it is imported (``if TYPE_CHECKING:`` left out)."""
    path = REPO / (module.replace(".", "/") + ".py")
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:  # module level only
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_planning_imports_no_pyspark() -> None:
    """The planning modules and everything of the project they import load without
    pyspark, so these decisions are tested (and made) without a JVM."""
    seen: set[str] = set()
    todo = [
        "sparkjobs.compaction.plan",
        "sparkjobs.compaction.fallback",
        "sparkjobs.compaction.job",
        "sparkjobs.table.manifest",
    ]
    while todo:
        module = todo.pop()
        if module in seen or not (REPO / (module.replace(".", "/") + ".py")).exists():
            continue
        seen.add(module)
        imported = _module_imports(module)
        assert not {name for name in imported if name.split(".")[0] == "pyspark"}, module
        todo.extend(name for name in imported if name.split(".")[0] in {"sparkjobs", "consumer"})
    assert {"sparkjobs.compaction.plan", "sparkjobs.io", "sparkjobs.table.publish"} <= seen
