"""Worker processes for the demo, the benchmarks and the tests: start ``lander run``
as a child (:func:`start_worker`, the one place that knows how), read its metrics port
from its log, stop it by PID, wait for a condition or an ACTIVE stream; and the
progress lines (:class:`Say`) the demo and the chaos suite print.

Only processes this code started are signalled (never by name).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any


def start_worker(
    env: Mapping[str, str], log: Path | IO[bytes], *, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``lander run`` as a child process with ``env``; its stdout and stderr go
    to ``log`` (a path, appended to, or an open binary file). The one place that
    knows how a worker process is started."""
    if isinstance(log, Path):
        with log.open("ab") as out:
            return start_worker(env, out, cwd=cwd)
    return subprocess.Popen(
        [sys.executable, "-m", "consumer.cli", "run"],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def wait_stream_active(kinesis: Any, stream: str, timeout: float = 30.0) -> None:
    """Wait until a stream (created through a boto3 Kinesis client) is ACTIVE."""

    def active() -> bool:
        summary = kinesis.describe_stream_summary(StreamName=stream)
        return bool(summary["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE")

    wait_until(active, timeout, f"stream {stream} to become ACTIVE")


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.1) -> Any:
    """Poll until ``predicate`` returns something truthy; fail with ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


def stop_processes(
    procs: dict[str, subprocess.Popen[bytes]], timeout: float
) -> dict[str, int | None]:
    """SIGCONT (in case it is stopped) and SIGTERM every running process we started,
    wait, SIGKILL what is left; by PID only. Returns each exit code."""
    for proc in procs.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
    codes: dict[str, int | None] = {}
    for name, proc in procs.items():
        try:
            codes[name] = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            codes[name] = proc.wait()
    return codes


class WorkerProcess:
    """One ``lander run`` child with its log file and metrics port."""

    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.proc = start_worker(env, log_path)
        self.port: int | None = None

    def find_port(self) -> int | None:
        """The metrics port the worker logged, once it has."""
        if self.port is None:
            with contextlib.suppress(OSError):
                for raw in self.log_path.read_text(errors="replace").splitlines():
                    if "metrics and health endpoints listening" in raw:
                        with contextlib.suppress(ValueError, KeyError):
                            self.port = int(json.loads(raw)["port"])
        return self.port

    def get(self, path: str) -> tuple[int, str]:
        """GET a path of the worker's metrics server: (status, body); (0, "") if down."""
        port = self.find_port()
        if port is None:
            return 0, ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as reply:
                return int(reply.status), reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def stop(self, signum: int, timeout: float) -> int | None:
        """Signal the worker and wait; kill it if it does not exit in time."""
        if self.alive():
            self.proc.send_signal(signum)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        return code

    def tail(self, lines: int = 15) -> str:
        """The end of the worker's log, for a failure message."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


class Say:
    """Progress lines on stdout, each with the seconds since the demo started."""

    def __init__(self, out: IO[str] = sys.stdout) -> None:
        self.out = out
        self.started = time.monotonic()

    def __call__(self, text: str) -> None:
        """Print one progress line."""
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {text}\n")
        self.out.flush()
