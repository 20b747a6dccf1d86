"""`lander compact` and `lander analyse` on an empty window, and what their files allow.

An empty window (no landed object, or nothing compacted) is said in one line and exits
3, before any Spark session starts when the URIs are local: no JVM in these tests
(``get_session`` is replaced by one that fails the test if called). Files the jobs write
outside Spark are readable by others, as a plain ``open()`` would make them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from consumer import cli
from sparkjobs import cli as jobs_cli
from sparkjobs.io import LocalFilesystem
from sparkjobs.publish import HourEntry, OutputFile, Pointer

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

    def get_session(*_: Any, **__: Any) -> Any:
        raise SparkStartedError

    monkeypatch.setattr("sparkjobs.session.get_session", get_session)
    monkeypatch.setattr(jobs_cli, "configure_logging", lambda *_, **__: None)


def _landed(archive: Path, day: str, hour: str, minute: str) -> Path:
    folder = archive / f"stream={STREAM}" / f"dt={day}" / f"hour={hour}" / f"minute={minute}"
    path = folder / SHARD / "49590338271490256608559692538361571095921575989136588898.jsonl.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
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


def _publish(tmp_path: Path, *, rows: int) -> None:
    """A pointer for the day's hour 05, with one file when ``rows``, none otherwise."""
    files = (OutputFile(f"_runs/r1/dt={DAY}/hour=05/part-0.parquet", 100),) if rows else ()
    entry = HourEntry(f"{DAY}T05", "r1", f"{DAY}T06:00:00+00:00", "digest", 1, rows, files)
    uri = (tmp_path / "compacted" / f"stream={STREAM}" / "_published" / f"dt={DAY}.json").as_uri()
    LocalFilesystem().write_atomic(uri, Pointer(STREAM, DAY, "r1", (entry,)).to_json())


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
    """Pointers, manifests and report.html (LocalFilesystem.write_atomic) are 0644 and the
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
    target = tmp_path / "compacted" / "_published" / "dt=2026-11-21.json"
    with _umask(0o027):
        LocalFilesystem().write_atomic(target.as_uri(), b"{}\n")
    assert _mode(target) == 0o640
    assert _mode(target.parent) == 0o750
