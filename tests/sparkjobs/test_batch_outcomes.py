"""What a batch run tells its scheduler and Prometheus, without a JVM.

`lander compact` with bad input exits 4 (0 with --allow-bad-input), the worst window's
code winning; at the end of a run each stream's counts and exit code go to a
Pushgateway (here a small HTTP server on loopback that records what it is sent), and a
push that fails is one warning that changes nothing else. `lander maintain` on a table
that does not exist exits 3 with one line. The Spark job is stood in for as in
test_batch_cli.py (its ``_Runs``); the real job's bad input end to end is in
test_compact.py.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import structlog

from sparkjobs import cli as jobs_cli
from sparkjobs.compaction.runmetrics import WindowRun, push_runs, registry_for
from sparkjobs.settings import CompactSettings, load
from sparkjobs.table.manifest import BadFile, HourStats, RunManifest
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
    assert _said(err) == [
        f"lander compact: {STREAM} {DAY}: 2 bad input file(s), listed on stdout; the "
        "readable rest is published (--allow-bad-input: exit 0)"
    ]
    assert _compact(tmp_path, "--allow-bad-input") == 0
    out, err = capsys.readouterr()
    assert f"  bad input: {CORRUPT.file}" in out
    assert _said(err) == []
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


# -- the Pushgateway ---------------------------------------------------------------------


class _Gateway(BaseHTTPRequestHandler):
    """Records each request (method, path, body) on the server; answers 200 as the
    Pushgateway does."""

    server: Any

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.received.append((self.command, self.path, self.rfile.read(length).decode()))
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        self._record()

    def do_PUT(self) -> None:
        self._record()

    def log_message(self, *_: Any) -> None:
        return


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """A Pushgateway stand-in on 127.0.0.1 (a free port): its URL and what it received."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _samples(body: str) -> dict[str, float]:
    """The text format's samples (``name{labels}`` -> value), comments left out."""
    found = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_each_stream_is_pushed_once_with_its_windows_counts_and_exit_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gateway: tuple[str, list[tuple[str, str, str]]],
) -> None:
    """One POST per stream to job lander_compact, grouped by stream, over HTTP: the
    window's bad input by kind (zeros too, so a clean night replaces a bad one) and
    rows, the stream's exit code and finish time, and its last success only when it
    succeeded (a stream whose window was empty keeps the one the gateway has)."""
    url, received = gateway
    _landed(tmp_path / "archive", DAY, "05", "17")
    runs = _Runs(monkeypatch, fail=set())
    runs.bad[(STREAM, DAY)] = [TRUNCATED, CORRUPT]
    monkeypatch.setenv("LANDER_PUSHGATEWAY", url)
    assert _compact(tmp_path, "--stream", f"{STREAM},payments") == 4
    assert [(method, path) for method, path, _ in received] == [
        ("POST", f"/metrics/job/lander_compact/stream/{STREAM}"),
        ("POST", "/metrics/job/lander_compact/stream/payments"),
    ]
    orders, payments = (_samples(body) for _, _, body in received)
    window = f'window="{DAY}"'
    assert orders[f'lander_compact_bad_input_files{{kind="truncated",{window}}}'] == 1
    assert orders[f'lander_compact_bad_input_files{{kind="corrupt",{window}}}'] == 1
    assert orders[f'lander_compact_bad_input_files{{kind="malformed",{window}}}'] == 0
    assert orders[f'lander_compact_bad_input_lines{{kind="truncated",{window}}}'] == 7
    assert orders[f'lander_compact_bad_input_lines{{kind="corrupt",{window}}}'] == 3
    assert orders[f"lander_compact_rows_published{{{window}}}"] == 0
    assert orders["lander_compact_last_exit_code"] == 4
    finished = orders["lander_compact_last_finish_timestamp_seconds"]
    assert orders["lander_compact_last_success_timestamp_seconds"] == finished > 1.7e9
    assert payments["lander_compact_last_exit_code"] == 3
    assert "lander_compact_last_success_timestamp_seconds" not in payments
    assert not [name for name in payments if "window=" in name]


def test_a_push_that_fails_is_one_warning_and_leaves_the_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens on the gateway's port: one warning naming it, the job's code."""
    with socket.socket() as probe:  # a port that was free a moment ago, now closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _landed(tmp_path / "archive", DAY, "05", "17")
    _Runs(monkeypatch, fail=set()).bad[(STREAM, DAY)] = [CORRUPT]
    with structlog.testing.capture_logs() as logs:
        code = _compact(
            tmp_path, "--stream", f"{STREAM},payments", "--pushgateway", f"http://127.0.0.1:{port}"
        )
    assert code == 4
    assert [entry["log_level"] for entry in logs] == ["warning"]
    assert logs[0]["event"] == "metrics push failed; the exit code is the job's"
    assert logs[0]["pushgateway"] == f"http://127.0.0.1:{port}"
    assert f"stream {STREAM}: URLError" in logs[0]["error"]
    assert f"{STREAM} {DAY}: published;" in capsys.readouterr().out


def test_without_prometheus_client_the_push_is_the_one_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster running the jobs from their zip may lack it: the job still runs."""
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    failed = push_runs("http://127.0.0.1:9", [WindowRun(STREAM, DAY, 0)], {STREAM: 0}, 5.0)
    assert failed == "prometheus_client is not installed (pip install prometheus-client)"


def test_a_window_that_failed_or_was_up_to_date_pushes_no_window_series() -> None:
    """Nothing was counted: the run's code and times only (the previous counts stay, so
    a retry that finds the window published does not clear its bad input)."""
    manifest = RunManifest("r", STREAM, DAY, "a", "o", "t")
    manifest.status = "published"
    manifest.hours = [HourStats(f"{DAY}T05", 1, 10, input_rows=9, output_rows=8)]
    again = RunManifest("r2", STREAM, NEXT, "a", "o", "t")
    again.status = "up-to-date"
    windows = [WindowRun(STREAM, DAY, 0, manifest), WindowRun(STREAM, NEXT, 1, again)]
    names = {m.name for m in registry_for(STREAM, windows, 1, 5.0).collect()}
    assert names == {
        "lander_compact_bad_input_files",
        "lander_compact_bad_input_lines",
        "lander_compact_rows_read",
        "lander_compact_rows_published",
        "lander_compact_last_exit_code",
        "lander_compact_last_finish_timestamp_seconds",
    }
    alone = registry_for(STREAM, windows[1:], 1, 5.0).collect()
    assert {m.name for m in alone} == {
        "lander_compact_last_exit_code",
        "lander_compact_last_finish_timestamp_seconds",
    }


@pytest.mark.parametrize("bad", ["localhost:9091", "ftp://gw:9091", "http://"])
def test_the_pushgateway_setting_is_an_http_url(bad: str) -> None:
    from consumer.config import ConfigError

    with pytest.raises(ConfigError, match="LANDER_PUSHGATEWAY"):
        load(CompactSettings, stream=STREAM, archive="file:///a", compacted="file:///c",
             pushgateway=bad)  # fmt: skip
    good = load(CompactSettings, stream=STREAM, archive="file:///a", compacted="file:///c",
                pushgateway="http://gw:9091/")  # fmt: skip
    assert good.pushgateway == "http://gw:9091"


# -- maintain ----------------------------------------------------------------------------


def _said(err: str) -> list[str]:
    """The command's own lines on stderr, without the structured log's records (whether
    and how those reach stderr depends on what configured logging before, in-process)."""
    return [line for line in err.splitlines() if line.startswith("lander ")]


def test_maintain_of_a_table_that_does_not_exist_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No catalog at all, then a catalog without the second stream's table: one line
    naming the table and the catalog; the table that exists is still maintained."""
    compacted = (tmp_path / "compacted").as_uri()
    assert _maintain(tmp_path) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert _said(err) == [
        f"lander maintain: lander.{STREAM}: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]
    assert not (tmp_path / "compacted").exists(), "maintain made something"

    _publish(tmp_path, rows=10)
    assert _maintain(tmp_path, "--stream", f"{STREAM},payments") == 3
    out, err = capsys.readouterr()
    (done,) = [line for line in out.splitlines() if line.startswith("lander.")]
    assert done.startswith(f"lander.{STREAM}: snapshots expired 0, kept 1;")
    assert _said(err) == [
        "lander maintain: lander.payments: no such table in catalog 'lander' (output "
        f"{compacted}): run lander compact first"
    ]
