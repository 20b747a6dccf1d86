"""When a board worker writes a troubled shard's report into its lease: while it fails,
at most once per renew interval; once more when it recovers; never for healthy shards."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given
from hypothesis import strategies as st

from consumer.leases.board_coordinator import BoardCoordinator
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import ShardReport
from consumer.leases.reports import TroubleReports

OK = ShardReport(pending=3, checkpoint_age_ms=10)
FAILING = ShardReport(pending=3, checkpoint_age_ms=900, failures=2, last_error="boom")


def test_a_failing_shard_is_reported_each_interval_and_cleared_once() -> None:
    reports = TroubleReports(interval=3.0)
    held = {"a", "b"}
    assert reports.due({"a": OK, "b": OK}, held, 0.0) == []
    assert reports.due({"a": FAILING, "b": OK}, held, 1.0) == ["a"]
    reports.wrote("a", FAILING, 1.0)
    assert reports.due({"a": FAILING, "b": OK}, held, 3.9) == []
    assert reports.due({"a": FAILING, "b": OK}, held, 4.0) == ["a"]
    reports.wrote("a", FAILING, 4.0)
    assert reports.due({"a": OK, "b": OK}, held, 4.1) == ["a"], "the error is cleared"
    reports.wrote("a", OK, 4.1)
    assert reports.due({"a": OK, "b": OK}, held, 100.0) == []
    # A shard no longer held is forgotten: taken again later, it starts afresh.
    reports.wrote("b", FAILING, 5.0)
    assert reports.due({"a": OK}, {"a"}, 6.0) == []
    assert "b" not in reports.written


def test_a_stalled_shard_is_reported_though_nothing_fails() -> None:
    """Records that wait past the stall time make a report due (status shows the shard
    stalled with its count); the checkpoint moving again clears it once."""
    reports = TroubleReports(interval=3.0, stall_seconds=60.0)
    waiting = ShardReport(pending=8_280, checkpoint_age_ms=59_999)
    stalled = ShardReport(pending=8_280, checkpoint_age_ms=60_000)
    assert reports.due({"s": waiting}, {"s"}, 0.0) == []
    assert reports.due({"s": stalled}, {"s"}, 1.0) == ["s"]
    reports.wrote("s", stalled, 1.0)
    assert reports.due({"s": stalled}, {"s"}, 2.0) == []
    assert reports.due({"s": OK}, {"s"}, 2.5) == ["s"]
    reports.wrote("s", OK, 2.5)
    assert reports.due({"s": OK}, {"s"}, 50.0) == []
    # Old waits with nothing pending are no stall.
    assert reports.due({"s": ShardReport(pending=0, checkpoint_age_ms=10**9)}, {"s"}, 60.0) == []


@given(steps=st.lists(st.tuples(st.floats(0.01, 5.0), st.booleans()), min_size=1, max_size=60))
def test_writes_are_bounded_and_the_lease_ends_showing_the_truth(
    steps: list[tuple[float, bool]],
) -> None:
    """Whatever the sequence of failing and healthy beats, a write comes at most once
    per interval while failing plus once per recovery, and after each beat the lease
    shows trouble exactly when the shard has it (or a write is due)."""
    reports = TroubleReports(interval=3.0)
    now, shown, writes, recoveries = 0.0, False, [], 0
    for gap, failing in steps:
        now += gap
        report = FAILING if failing else OK
        for key in reports.due({"s": report}, {"s"}, now):
            assert key == "s"
            if shown and not failing:
                recoveries += 1
            reports.wrote("s", report, now)
            shown = failing
            writes.append((now, failing))
        assert shown == failing
    failing_writes = [t for t, f in writes if f]
    for earlier, later in itertools.pairwise(failing_writes):
        assert later - earlier >= 3.0 or any(not f for t, f in writes if earlier < t < later)
    assert len(writes) - len(failing_writes) == recoveries


def test_a_report_due_for_a_lease_given_up_meanwhile_is_skipped() -> None:
    """The beat picks the due reports, then awaits each write: a hand-off finishing in
    between drops the lease and its report, and the beat must not fail on it (a
    chaos run's worker once exited on that KeyError)."""
    worker = BoardCoordinator(MemoryLeaseStore(), "w", 3.0, 1.0)
    worker.reports["shardId-000000000002"] = FAILING  # chosen; the lease went meanwhile
    assert asyncio.run(worker.write_report("shardId-000000000002")) is None
