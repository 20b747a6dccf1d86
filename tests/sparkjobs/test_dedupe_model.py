"""One dedupe model, whatever the run shape: the rule, and runs that agree with it.

:mod:`sparkjobs.compaction.dedupe` is the rule; :mod:`sparkjobs.compaction.plan` decides
which hours a run rewrites and which objects it reads. Together they must make every
published hour hold what a from-scratch compaction of the same archive would: day runs,
hour runs, re-runs after late objects, in any order. The property test below simulates
such run sequences
with the real planning and the reference rule (no Spark: the Spark job is held to the
same rule in test_compact.py), over random archives that grow between runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.archive.layout import parse_relative
from sparkjobs.compaction.dedupe import Copy, fates
from sparkjobs.compaction.job import CompactJob
from sparkjobs.compaction.plan import inputs_of, plan_window
from sparkjobs.table.publish import HourEntry, InputFile, inputs_digest
from sparkjobs.window import Window, hour_label

START = datetime(2026, 11, 20, tzinfo=UTC)
DAY = timedelta(days=1)


def _copy(at: int, event: str | None, seq: int, shard: int = 0, rel: str = "r") -> Copy:
    return Copy(f"shard-{shard}", str(seq), 0, START + timedelta(minutes=at), event, rel)


def _causes(copies: list[Copy], horizon: timedelta) -> list[str]:
    found = fates(copies, horizon)
    return [found[c] for c in copies]


def test_a_retry_within_the_horizon_is_a_producer_duplicate_and_one_beyond_is_kept() -> None:
    copies = [_copy(0, "e", 1), _copy(10, "e", 2), _copy(25 * 60, "e", 3)]
    assert _causes(copies, DAY) == ["kept", "producer", "kept"]
    assert _causes(copies, timedelta(minutes=5)) == ["kept", "kept", "kept"]


def test_the_previous_copy_decides_even_when_it_was_itself_dropped() -> None:
    """Three copies 20 h apart with a 24 h horizon: the third is 40 h after the kept
    one but 20 h after the second, so it is a retry too (any copy counts)."""
    copies = [_copy(0, "e", 1), _copy(20 * 60, "e", 2), _copy(40 * 60, "e", 3)]
    assert _causes(copies, DAY) == ["kept", "producer", "producer"]


def test_copies_of_one_position_are_transport_duplicates_and_ties_go_by_position() -> None:
    first = _copy(5, "e", 7, rel="a")
    copies = [_copy(5, "e", 7, rel="b"), first, _copy(5, "e", 12), _copy(5, "e", 100, shard=1)]
    assert _causes(copies, DAY) == ["transport", "kept", "producer", "producer"]
    # Sequence numbers compare as numbers: "12" follows "7" though it sorts first as text.
    assert fates([_copy(5, None, 12), _copy(5, None, 12, rel="x")], DAY)[
        _copy(5, None, 12, rel="x")
    ] == ("transport")


def test_records_without_an_event_id_are_only_deduped_by_position() -> None:
    copies = [_copy(0, None, 1), _copy(1, None, 2), _copy(1, None, 2, rel="z")]
    assert _causes(copies, DAY) == ["kept", "kept", "transport"]


def _numbered(at: int, key: str, number: str | None, seq: int, event: str | None = None) -> Copy:
    when = START + timedelta(minutes=at)
    return Copy("shard-0", str(seq), 0, when, event, "r", number, key)


def test_a_producer_sequence_dedupes_records_without_an_event_id() -> None:
    """The same partition key and number within the horizon is a sequence duplicate
    (counted apart from producer duplicates); another key, another number, a retry
    beyond the horizon, or a record with an event id are judged as before."""
    copies = [
        _numbered(0, "p", "7", 1),
        _numbered(5, "p", "7", 2),  # a retry: sequence
        _numbered(6, "q", "7", 3),  # another producer's 7
        _numbered(7, "p", "8", 4),
        _numbered(8, "p", "8", 4),  # a transport copy
        _numbered(9, "p", "7", 5, event="e"),  # an id wins: judged by its id
        _numbered(2 * 24 * 60, "p", "8", 6),  # two days later: kept again
        _numbered(10, "p", None, 7),
        _numbered(11, "p", None, 8),  # no number: by position
    ]
    assert _causes(copies, DAY) == [
        "kept",
        "sequence",
        "kept",
        "kept",
        "transport",
        "kept",
        "kept",
        "kept",
        "kept",
    ]


# ---------------------------------------------------------------- run sequences


@dataclass(frozen=True)
class Landed:
    """One landed object: its listing, its lines, and the step it lands at."""

    file: InputFile
    copies: tuple[Copy, ...]
    step: int


def _rel(minute: datetime, shard: int, name: str) -> str:
    return (
        f"dt={minute:%Y-%m-%d}/hour={minute:%H}/minute={minute:%M}/"
        f"shard=shard-{shard}/{name}.jsonl.gz"
    )


@st.composite
def archives(draw: st.DrawFn) -> list[Landed]:
    """Objects over three days; event ids from a small pool so retries are common."""
    objects: list[Landed] = []
    seq = 0
    for n in range(draw(st.integers(1, 14))):
        minute = START + timedelta(minutes=draw(st.integers(0, 3 * 24 * 60 - 1)))
        shard = draw(st.integers(0, 1))
        rel = _rel(minute, shard, f"o{n}")
        copies = []
        for _ in range(draw(st.integers(1, 3))):
            seq += 1
            second = draw(st.integers(0, 59))
            event = draw(st.sampled_from(["a", "b", "c", "d", None]))
            # Without an event id, some producers number each partition key's records.
            key, number = draw(st.sampled_from([("p", None), ("p", "1"), ("p", "2"), ("q", "1")]))
            at = minute + timedelta(seconds=second)
            copies.append(Copy(f"shard-{shard}", str(seq), 0, at, event, rel, number, key))
        step = draw(st.integers(0, 3))
        objects.append(Landed(InputFile(rel, 100 + n, step), tuple(copies), step))
        if draw(st.booleans()) and len(copies) > 1:  # a transport copy of part of it
            again = _rel(minute, shard, f"o{n}-again")
            part = tuple(dataclasses.replace(c, rel=again) for c in copies[1:])
            late = draw(st.integers(step, 3))
            objects.append(Landed(InputFile(again, 50 + n, late), part, late))
    return objects


WINDOWS = [
    *(Window.parse(f"{START + i * DAY:%Y-%m-%d}") for i in range(3)),
    *(Window.parse(f"{START + timedelta(hours=h):%Y-%m-%dT%H}") for h in (0, 23, 24, 25, 47, 70)),
]


class Compactor:
    """Runs as ``lander compact`` plans them, each stale hour computed by the rule over
    what the run reads, published per hour with its index (every line of its objects).

    A horizon hour the plan reads through its index contributes the lines stored when
    it was published, not the archive's current ones, and with no object to break ties
    (``rel`` empty sorts first, as the Spark job's null file hash does)."""

    def __init__(self, horizon_minutes: int) -> None:
        self.horizon_minutes = horizon_minutes
        self.entries: dict[str, HourEntry] = {}
        self.rows: dict[str, set[Copy]] = {}
        self.index: dict[str, list[Copy]] = {}
        self.indexed_reads = 0

    def run(self, window: Window, archive: list[Landed], step: int) -> None:
        landed = [o for o in archive if o.step <= step]
        job = CompactJob(
            "mem://a", "orders", window, "mem://o", horizon_minutes=self.horizon_minutes
        )
        plan = plan_window(job, _by_hour(landed), self.entries)
        lines = {o.file.rel: o.copies for o in landed}
        read = [c for rel in plan.read for c in lines[rel]]
        index = [dataclasses.replace(c, rel="") for hour in plan.indexed for c in self.index[hour]]
        self.indexed_reads += len(plan.indexed)
        found = fates(read + index, timedelta(minutes=self.horizon_minutes))
        for hour in plan.stale:
            self.rows[hour] = {c for c in read if found[c] == "kept" and _hour(c) == hour}
            self.index[hour] = [c for f in plan.own[hour] for c in lines[f.rel]]
            self.entries[hour] = HourEntry(
                hour,
                "r",
                "t",
                plan.digests[hour],
                0,
                0,
                own_digest=inputs_digest(plan.own[hour]),
                files=1,
                dropped=1,
            )


def _by_hour(landed: list[Landed]) -> dict[datetime, list[InputFile]]:
    by_hour: dict[datetime, list[InputFile]] = {}
    for o in landed:
        where = parse_relative(o.file.rel)
        assert where is not None
        by_hour.setdefault(where.hour, []).append(o.file)
    return {h: sorted(files) for h, files in by_hour.items()}


def _hour(copy: Copy) -> str:
    where = parse_relative(copy.rel)
    assert where is not None
    return hour_label(where.hour)


def _from_scratch(archive: list[Landed], horizon_minutes: int) -> dict[str, set[Copy]]:
    found = fates([c for o in archive for c in o.copies], timedelta(minutes=horizon_minutes))
    rows: dict[str, set[Copy]] = {}
    for copy, cause in found.items():
        if cause == "kept":
            rows.setdefault(_hour(copy), set()).add(copy)
    return rows


def _current(compactor: Compactor, archive: list[Landed]) -> Mapping[str, set[Copy]]:
    """Published hours whose inputs are what the final archive holds for them."""
    by_hour = _by_hour(archive)
    up_to_date = {}
    for hour, entry in compactor.entries.items():
        start = datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=UTC)
        digest = inputs_digest(inputs_of(start, by_hour, compactor.horizon_minutes))
        if digest == entry.inputs_digest:
            up_to_date[hour] = compactor.rows[hour]
    return up_to_date


@settings(max_examples=300, deadline=None)
@given(
    archive=archives(),
    runs=st.lists(st.tuples(st.sampled_from(WINDOWS), st.integers(0, 3)), max_size=8),
    horizon=st.sampled_from([0, 1, 30, 90, 24 * 60]),
)
def test_any_run_sequence_publishes_what_a_from_scratch_run_publishes(
    archive: list[Landed], runs: list[tuple[Window, int]], horizon: int
) -> None:
    """Runs over a growing archive, in time order: every hour whose published inputs
    match the final archive holds the from-scratch rows; re-running every window then
    makes every hour do, and a second pass changes nothing."""
    truth = _from_scratch(archive, horizon)
    compactor = Compactor(horizon)
    for window, step in sorted(runs, key=lambda run: run[1]):
        compactor.run(window, archive, step)
    for hour, rows in _current(compactor, archive).items():
        assert rows == truth.get(hour, set()), hour
    for window in WINDOWS[:3]:
        compactor.run(window, archive, 3)
    for hour, rows in compactor.rows.items():
        assert rows == truth.get(hour, set()), hour
    assert set(_current(compactor, archive)) == set(compactor.entries)


def _landed(minute: int, copies: list[tuple[int, str | None]], name: str) -> Landed:
    """An object at ``minute`` after START (seconds into it, event id per copy)."""
    at = START + timedelta(minutes=minute)
    rel = _rel(at, 0, name)
    lines = tuple(
        Copy("shard-0", str(minute * 10 + i), 0, at + timedelta(seconds=s), event, rel)
        for i, (s, event) in enumerate(copies)
    )
    return Landed(InputFile(rel, 10, 0), lines, 0)


def test_the_next_day_reads_the_day_before_through_its_index_and_keeps_the_chain() -> None:
    """A retry chain across midnight: kept at 02:00, retried at 22:00 (dropped), again
    at 12:00 the next day. Day two reads day one's hours through their index, and the
    dropped copy at 22:00 in it still makes the third copy a retry."""
    archive = [
        _landed(2 * 60, [(0, "e"), (1, None)], "a"),
        _landed(22 * 60, [(0, "e")], "b"),
        _landed(36 * 60, [(0, "e"), (5, "f")], "c"),
    ]
    compactor = Compactor(24 * 60)
    compactor.run(WINDOWS[0], archive, 0)
    assert compactor.indexed_reads == 0
    compactor.run(WINDOWS[1], archive, 0)
    assert compactor.indexed_reads == 2  # the hours of day one that hold objects
    truth = _from_scratch(archive, 24 * 60)
    for hour, rows in compactor.rows.items():
        assert rows == truth.get(hour, set()), hour
    noon = hour_label(START + timedelta(hours=36))
    assert [c.event_id for c in compactor.rows[noon]] == ["f"]


def test_an_hour_whose_objects_changed_is_read_from_its_objects_not_its_index() -> None:
    archive = [_landed(22 * 60, [(0, "e")], "b"), _landed(36 * 60, [(0, "e")], "c")]
    compactor = Compactor(24 * 60)
    compactor.run(WINDOWS[0], archive, 0)
    late = dataclasses.replace(_landed(22 * 60 + 1, [(0, "g")], "late"), step=1)
    compactor.run(WINDOWS[1], [*archive, late], 1)
    assert compactor.indexed_reads == 0  # 22:00 has a late object: its index is stale
    noon = hour_label(START + timedelta(hours=36))
    assert compactor.rows[noon] == set()
