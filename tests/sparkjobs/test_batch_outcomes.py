"""What a batch run tells its scheduler, without a JVM.

`lander compact` with bad input exits 4 (0 with --allow-bad-input), the worst window's
code winning. `lander maintain` on a table that does not exist exits 3 with one line.
The Spark job is stood in for as in test_batch_cli.py (its ``_Runs``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkjobs import cli as jobs_cli
from sparkjobs.table.manifest import BadFile
from tests.sparkjobs.test_batch_cli import (  # _no_spark: autouse here as there
    DAY,
    NEXT,
    STREAM,
    _compact,
    _landed,
    _maintain,
    _no_spark,  # noqa: F401
    _publish,
    _Runs,
)

TRUNCATED = BadFile("dt=2026-11-21/hour=05/minute=17/shard=s/a.jsonl.gz", "truncated", 7, "ends")
CORRUPT = BadFile("dt=2026-11-21/hour=05/minute=18/shard=s/b.jsonl.gz", "corrupt", 3, "crc")


def test_the_worst_code_wins_failed_then_bad_input_then_empty() -> None:
    worst = jobs_cli._worst
    assert worst([]) == worst([0, 0]) == 0
    assert worst([0, 3]) == 3
    assert worst([3, 4, 0]) == 4
    assert worst([4, 1, 3]) == 1


def test_bad_input_exits_4_and_allow_bad_input_makes_it_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The readable rest is published and each bad file named on stdout as before; one
    line on stderr says why the exit code is 4. The flag, or the variable, make it 0."""
    _landed(tmp_path / "archive", DAY, "05", "17")
    runs = _Runs(monkeypatch, fail=set())
    runs.bad[(STREAM, DAY)] = [TRUNCATED, CORRUPT]
    assert _compact(tmp_path) == 4
    out, err = capsys.readouterr()
    assert f"{STREAM} {DAY}: published;" in out
    assert [line for line in out.splitlines() if line.startswith("  bad input: ")] == [
        f"  bad input: {TRUNCATED.file}: truncated, 7 lines (ends)",
        f"  bad input: {CORRUPT.file}: corrupt, 3 lines (crc)",
    ]
    assert err.splitlines() == [
        f"lander compact: {STREAM} {DAY}: 2 bad input file(s), listed on stdout; the "
        "readable rest is published (--allow-bad-input: exit 0)"
    ]
    assert _compact(tmp_path, "--allow-bad-input") == 0
    out, err = capsys.readouterr()
    assert f"  bad input: {CORRUPT.file}" in out
    assert err == ""
    monkeypatch.setenv("LANDER_COMPACT_ALLOW_BAD_INPUT", "true")
    assert _compact(tmp_path) == 0


def test_with_several_windows_a_failure_outranks_bad_input_which_outranks_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "archive"
    _landed(archive, DAY, "05", "17")
    _landed(archive, NEXT, "06", "00", stream="payments")
    runs = _Runs(monkeypatch, fail=set())
    runs.bad[(STREAM, DAY)] = [CORRUPT]
    both = ("--stream", f"{STREAM},payments", "--window", f"{DAY}..{NEXT}")
    assert _compact(tmp_path, *both) == 4  # bad input, and two empty windows
    runs.fail.add(("payments", NEXT))
    assert _compact(tmp_path, *both) == 1


# -- maintain ----------------------------------------------------------------------------


def test_maintain_of_a_table_that_does_not_exist_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No catalog at all, then a catalog without the second stream's table: one line
    naming the table and the catalog; the table that exists is still maintained."""
    compacted = (tmp_path / "compacted").as_uri()
    assert _maintain(tmp_path) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"lander maintain: lander.{STREAM}: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]
    assert not (tmp_path / "compacted").exists(), "maintain made something"

    _publish(tmp_path, rows=10)
    assert _maintain(tmp_path, "--stream", f"{STREAM},payments") == 3
    out, err = capsys.readouterr()
    (done,) = [line for line in out.splitlines() if line.startswith("lander.")]
    assert done.startswith(f"lander.{STREAM}: snapshots expired 0, kept 1;")
    assert err.splitlines() == [
        "lander maintain: lander.payments: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]
