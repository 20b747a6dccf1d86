"""`lander compact` and `lander analyse` on an empty window, and what their files allow.

An empty window (no landed object, or nothing compacted) is said in one line and exits
3, before any Spark session starts when the URIs are local: no JVM in these tests
(``get_session`` is replaced by one that fails the test if called). Files the jobs write
outside Spark are readable by others, as a plain ``open()`` would make them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sparkjobs.session
from consumer import cli
from sparkjobs import cli as jobs_cli
from sparkjobs.catalog import table_ref
from sparkjobs.compaction.compact import CompactionError, CompactJob
from sparkjobs.io import LocalFilesystem
from sparkjobs.table.columns import COMPACTED_COLUMNS
from sparkjobs.table.manifest import BadFile, RunManifest
from sparkjobs.table.publish import HourEntry
from sparkjobs.table.table import replace_hours

STREAM = "orders"
DAY = "2026-11-21"
SHARD = "shard=shardId-000000000000"


class SparkStartedError(Exception):
    """Raised instead of starting a JVM: the job got past its empty-window check."""


@pytest.fixture(autouse=True)
def _no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LANDER_* from the caller, no JVM, and no logging set up on captured streams."""
    for key in list(os.environ):
        if key.upper().startswith("LANDER_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("LANDER_SPARK_CDS", "off")

    def get_session(*_: Any, **__: Any) -> Any:
        raise SparkStartedError

    monkeypatch.setattr("sparkjobs.session.get_session", get_session)
    monkeypatch.setattr(jobs_cli, "configure_logging", lambda *_, **__: None)


def _landed(
    archive: Path, day: str, hour: str, minute: str, *, stream: str = STREAM, size: int = 0
) -> Path:
    folder = archive / f"stream={stream}" / f"dt={day}" / f"hour={hour}" / f"minute={minute}"
    path = folder / SHARD / "49590338271490256608559692538361571095921575989136588898.jsonl.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * size)
    return path


def _compact(tmp_path: Path, *extra: str) -> int:
    return cli.main(
        [
            "compact",
            "--stream",
            STREAM,
            "--archive",
            (tmp_path / "archive").as_uri(),
            "--compacted",
            (tmp_path / "compacted").as_uri(),
            "--window",
            DAY,
            *extra,
        ]
    )


def _analyse(tmp_path: Path, *extra: str) -> int:
    return cli.main(
        [
            "analyse",
            "--stream",
            STREAM,
            "--compacted",
            (tmp_path / "compacted").as_uri(),
            "--window",
            DAY,
            *extra,
        ]
    )


def _publish(tmp_path: Path, *, rows: int, run: str = "r1") -> None:
    """The day's hour 05 published in the table, with one file when ``rows``, none otherwise."""
    ref = table_ref((tmp_path / "compacted").as_uri(), STREAM)
    hour = f"{DAY}T05"
    files = []
    if rows:
        path = tmp_path / "compacted" / f"stream={STREAM}" / "data" / run / "part-0.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        arrival = datetime(2026, 11, 21, 5, 30, tzinfo=UTC)
        columns = {
            name: pa.array(
                [arrival if kind == "timestamp" else (1 if kind == "long" else "x")] * rows
            )
            for name, kind, _ in COMPACTED_COLUMNS
        }
        # As a run writes them: the columns every record has are required.
        kinds = {"string": pa.string(), "long": pa.int64(), "timestamp": pa.timestamp("us", "UTC")}
        schema = pa.schema(
            [pa.field(name, kinds[kind], nullable) for name, kind, nullable in COMPACTED_COLUMNS]
        )
        pq.write_table(pa.table(columns, schema=schema), path)
        files = [f"file://{path}"]  # as_uri() would escape the "=" of stream=
    entry = HourEntry(hour, run, f"{DAY}T06:00:00+00:00 {run}", "digest", 1, rows)
    assert replace_hours(ref, {hour: entry}, {hour: files}, run).hours == [hour]


# -- compact -----------------------------------------------------------------------------


def test_compact_of_an_empty_window_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No landed object in the window: one line on stderr, exit 3, no Spark, nothing written."""
    assert _compact(tmp_path) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"lander compact: no landed input for stream {STREAM} in window {DAY} under "
        f"{(tmp_path / 'archive').as_uri()}; nothing to do"
    ]
    assert not (tmp_path / "compacted").exists()


def test_lookback_objects_alone_do_not_make_a_window_non_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Objects of the minutes before the window are read only to spot retries: exit 3."""
    _landed(tmp_path / "archive", "2026-11-20", "23", "55")
    assert _compact(tmp_path) == 3
    assert "no landed input" in capsys.readouterr().err


def test_allow_empty_flag_makes_an_empty_window_a_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--allow-empty: the same line, exit 0, still nothing started or written."""
    assert _compact(tmp_path, "--allow-empty") == 0
    assert capsys.readouterr().err.endswith("; nothing to do\n")
    assert not (tmp_path / "compacted").exists()


def test_allow_empty_setting_makes_an_empty_window_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LANDER_COMPACT_ALLOW_EMPTY=true does what --allow-empty does (case ignored)."""
    monkeypatch.setenv("LANDER_COMPACT_ALLOW_EMPTY", "TRUE")
    assert _compact(tmp_path) == 0


def test_a_window_with_input_goes_on_to_spark(tmp_path: Path) -> None:
    """One landed object in any hour of the window is enough to start the job."""
    _landed(tmp_path / "archive", DAY, "05", "17")
    with pytest.raises(SparkStartedError):
        _compact(tmp_path)


# -- several streams and windows in one run ----------------------------------------------

NEXT = "2026-11-22"


class _Runs:
    """Stands in for the Spark job: records each window it is given, fails on request."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: set[tuple[str, str]]) -> None:
        self.calls: list[tuple[str, str, datetime | None, int | None]] = []
        self.sizes: list[int | None] = []
        self.fail = fail
        self.bad: dict[tuple[str, str], list[BadFile]] = {}
        """Bad input each window's manifest reports."""
        self.after: dict[tuple[str, str], Callable[[], None]] = {}
        monkeypatch.setattr("sparkjobs.session.get_session", lambda *_, **__: object())
        monkeypatch.setattr("sparkjobs.session.finish", lambda *_: None)
        monkeypatch.setattr("sparkjobs.compaction.compact.compact", self.compact)
        plan = sparkjobs.session.jvm_plan

        def jvm_plan(size: int | None) -> Any:
            self.sizes.append(size)
            return plan(size)

        monkeypatch.setattr("sparkjobs.session.jvm_plan", jvm_plan)

    def compact(
        self, _: Any, job: CompactJob, now: datetime | None = None, listed: Any = None
    ) -> RunManifest:
        key = (job.stream, job.window.label)
        files = None if listed is None else sum(len(found) for found in listed.values())
        self.calls.append((*key, now, files))
        self.after.pop(key, lambda: None)()
        if key in self.fail:
            raise CompactionError("strict: 1 bad input(s)")
        manifest = RunManifest("r", job.stream, job.window.label, job.archive, job.output, "t")
        manifest.status = "published"
        manifest.bad_files.extend(self.bad.get(key, []))
        return manifest


def test_every_stream_and_window_runs_in_order_and_the_worst_exit_code_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed or empty window does not stop the others; failed (1) wins over empty (3)."""
    archive = tmp_path / "archive"
    _landed(archive, DAY, "05", "17", size=10)
    _landed(archive, NEXT, "06", "00", size=20)
    _landed(archive, NEXT, "07", "00", stream="payments", size=30)
    runs = _Runs(monkeypatch, fail={(STREAM, NEXT)})
    code = _compact(tmp_path, "--stream", f"{STREAM},payments", "--window", f"{DAY}..{NEXT}")
    assert code == 1
    assert [(stream, window) for stream, window, _, _ in runs.calls] == [
        (STREAM, DAY),
        (STREAM, NEXT),
        ("payments", NEXT),
    ]
    # One JVM for all, its JIT chosen by all it reads: the first day again as the horizon.
    assert runs.sizes == [10 + 20 + 10 + 30]
    out, err = capsys.readouterr()
    assert f"{STREAM} {DAY}: published;" in out
    assert f"payments {NEXT}: published;" in out
    assert f"lander compact: {STREAM} {NEXT}: strict: 1 bad input(s)" in err
    assert f"no landed input for stream payments in window {DAY}" in err

    runs.fail.clear()
    assert _compact(tmp_path, "--stream", f"{STREAM},payments", "--window", f"{DAY},{NEXT}") == 3
    flags = ("--stream", f"{STREAM},payments", "--window", f"{DAY}..{NEXT}", "--allow-empty")
    assert _compact(tmp_path, *flags) == 0


def test_a_later_window_lists_its_inputs_when_its_turn_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object landed while an earlier window compacted is in the later window's run,
    and each run is stamped with the time its own listing began."""
    archive = tmp_path / "archive"
    _landed(archive, DAY, "05", "17")
    _landed(archive, NEXT, "06", "00")
    runs = _Runs(monkeypatch, fail=set())

    def land_late() -> None:
        _landed(archive, NEXT, "09", "30")

    runs.after[(STREAM, DAY)] = land_late
    started = datetime.now(UTC)
    assert _compact(tmp_path, "--window", f"{DAY},{NEXT}") == 0
    (_, _, first_at, first_files), (_, _, next_at, next_files) = runs.calls
    assert first_files == 1
    assert next_files == 3  # its two objects, and the first day's as its horizon
    assert first_at is not None
    assert next_at is not None
    assert started <= first_at < next_at


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (("--stream", "orders,bad name"), "'bad name' is not a stream name"),
        (("--stream", "orders,orders"), "a stream is named twice"),
        (("--window", "2026-11-22..2026-11-21"), "ends before it starts"),
        (("--window", "2026-11-21,2026-11-21T05"), "2026-11-21T05: overlaps 2026-11-21"),
    ],
)
def test_a_bad_list_of_streams_or_windows_fails_at_start_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, str], why: str
) -> None:
    assert _compact(tmp_path, *flags) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert why in err


# -- analyse -----------------------------------------------------------------------------


def test_analyse_of_a_window_never_compacted_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No published data for the window: one line on stderr, exit 3, no report."""
    assert _analyse(tmp_path) == 3
    assert capsys.readouterr().err.splitlines() == [
        f"lander analyse: no compacted data for stream {STREAM} in window {DAY} under "
        f"{(tmp_path / 'compacted').as_uri()}; nothing to do"
    ]
    assert not (tmp_path / "compacted").exists()


def test_analyse_of_a_window_compacted_empty_exits_3_or_0_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Published hours without rows are no data either; --allow-empty or
    LANDER_ANALYSE_ALLOW_EMPTY make that exit 0."""
    _publish(tmp_path, rows=0)
    assert _analyse(tmp_path) == 3
    assert _analyse(tmp_path, "--allow-empty") == 0
    monkeypatch.setenv("LANDER_ANALYSE_ALLOW_EMPTY", "true")
    assert _analyse(tmp_path) == 0


def test_analyse_of_a_compacted_window_goes_on_to_spark(tmp_path: Path) -> None:
    """A published file in the window is data: the job starts."""
    _publish(tmp_path, rows=10)
    with pytest.raises(SparkStartedError):
        _analyse(tmp_path)


def test_analyse_runs_every_window_given_in_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The day before was never compacted: said, the published day still analysed, exit 3."""
    _publish(tmp_path, rows=10)
    sessions: list[object] = []
    analysed: list[str] = []

    def get_session(*_: Any, **__: Any) -> object:
        sessions.append(object())
        return sessions[-1]

    monkeypatch.setattr("sparkjobs.session.get_session", get_session)
    monkeypatch.setattr("sparkjobs.session.finish", lambda *_: None)
    monkeypatch.setattr(
        "sparkjobs.analysis.analyse.analyse", lambda _, job: analysed.append(job.window.label)
    )
    monkeypatch.setattr("sparkjobs.analysis.report.render_text", lambda _: "summary")
    assert _analyse(tmp_path, "--window", f"2026-11-20..{DAY}") == 3
    assert analysed == [DAY]
    assert len(sessions) == 1
    out, err = capsys.readouterr()
    assert "no compacted data for stream orders in window 2026-11-20" in err
    assert out.startswith("summary\nreport: ")


# -- maintain ----------------------------------------------------------------------------


def _maintain(tmp_path: Path, *extra: str) -> int:
    compacted = (tmp_path / "compacted").as_uri()
    return cli.main(["maintain", "--stream", STREAM, "--compacted", compacted, *extra])


def test_maintain_says_what_it_did_in_one_line_per_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh table: nothing expires, so the file hour 05's second commit replaced is
    still read by the first snapshot and stays; no Spark."""
    _publish(tmp_path, rows=10)
    _publish(tmp_path, rows=5, run="r2")
    assert _maintain(tmp_path) == 0
    out = [line for line in capsys.readouterr().out.splitlines() if line.startswith("lander.")]
    assert out == [
        f"lander.{STREAM}: snapshots expired 0, kept 2; files deleted 0 (0 bytes), "
        "unreferenced but younger than 3d 0; run manifests deleted 0; dropped-copy files "
        "deleted 0"
    ]


def test_maintain_refuses_a_retention_under_an_hour_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _maintain(tmp_path, "--orphan-age", "5m") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "LANDER_ORPHAN_AGE" in err[0]
    assert "at least 1h" in err[0]


# -- file modes --------------------------------------------------------------------------


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_written_for_readers_are_0644_under_umask_022(tmp_path: Path) -> None:
    """Manifests and report.html (LocalFilesystem.write_atomic) are 0644 and the
    folders made for them 0755 under umask 022; replacing a file keeps that; no
    temporary file is left beside it."""
    target = tmp_path / "reports" / f"stream={STREAM}" / DAY / "report.html"
    with _umask(0o022):
        LocalFilesystem().write_atomic(target.as_uri(), b"<html>1</html>")
        assert _mode(target) == 0o644
        assert _mode(target.parent) == 0o755
        assert _mode(tmp_path / "reports") == 0o755
        LocalFilesystem().write_atomic(target.as_uri(), b"<html>2</html>")
    assert _mode(target) == 0o644
    assert target.read_bytes() == b"<html>2</html>"
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


def test_file_modes_follow_the_umask_like_open(tmp_path: Path) -> None:
    """Under umask 027 the same write gives 0640 and 0750: the umask decides, as for open()."""
    target = tmp_path / "compacted" / "_manifests" / f"stream={STREAM}" / "run.json"
    with _umask(0o027):
        LocalFilesystem().write_atomic(target.as_uri(), b"{}\n")
    assert _mode(target) == 0o640
    assert _mode(target.parent) == 0o750
