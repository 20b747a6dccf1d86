"""Running the compaction to measure it: fresh processes and what their runs published.

A fresh ``lander compact`` is measured with its every descendant: this process becomes
the child subreaper, because the JVM PySpark starts is not waited for by its Python
parent, and without it the JVM's CPU would be lost at exit. The runs' manifests say
what each published, which the benchmarks check against :mod:`bench.prodlike_truth`.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.prodlike import DAY, STREAM
from bench.report import progress

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants (the JVM) become our children, so their CPU is counted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fresh_process(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv``; wall and CPU seconds of it and every descendant, and its stdout."""
    cpu, wall = _children_cpu(), time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    while True:  # reap what was re-parented to us (the JVM), so its CPU is counted
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if done.returncode != 0:
        raise RuntimeError(f"{argv[3:5]} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.monotonic() - wall, _children_cpu() - cpu, done.stdout


def measure_in_process(work: Callable[[], Any]) -> tuple[Any, float, float]:
    """``work()``'s result, and its wall and CPU seconds in this process."""
    cpu, wall = _self_cpu(), time.monotonic()
    result = work()
    return result, time.monotonic() - wall, _self_cpu() - cpu


def lander_compact(
    archive: Path,
    out: Path,
    window: str,
    compression: str | None = None,
    stream: str = STREAM,
) -> list[str]:
    """The ``lander compact`` command line of ``stream`` (several: comma-separated)."""
    extra = ["--compression", compression] if compression else []
    return [
        sys.executable,
        "-m",
        "consumer.cli",
        "compact",
        "--stream",
        stream,
        "--archive",
        f"file://{archive}",
        "--compacted",
        f"file://{out}",
        "--window",
        window,
        *extra,
    ]


def parquet_bytes(out: Path) -> int:
    """The bytes of every Parquet file under ``out``."""
    return sum(p.stat().st_size for p in out.rglob("*.parquet"))


def environment(class_archive: Path) -> dict[str, str]:
    """This process's environment without LANDER_ settings, plus the runs' own: no typed
    payload columns (DuckDB makes none; the engines compare the same output, and
    :func:`bench.compaction_session.typed_columns` measures what typing costs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    env["LANDER_PAYLOAD_SCHEMA"] = "off"
    env["LANDER_SPARK_MASTER"] = "local[2]"
    env["LANDER_LOG_FORMAT"] = "json"
    env["LANDER_SPARK_CDS"] = str(class_archive)
    return env


def build_class_archive(path: Path, env: dict[str, str]) -> dict[str, float]:
    """Build the AppCDS archive as the Spark image does, once, before any measured run."""
    script = Path(__file__).resolve().parents[1] / "deploy" / "docker" / "class_archive.py"
    progress("compaction: building the class archive (once, as the image build does)")
    wall, cpu, _ = fresh_process([sys.executable, str(script), str(path)], env)
    return {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}


def manifest(out: Path, window: str = DAY.isoformat(), stream: str = STREAM) -> dict[str, Any]:
    """The manifest of the one run published for ``stream``'s ``window``."""
    manifests = [
        json.loads(path.read_text())
        for path in (out / "_manifests" / f"stream={stream}").glob("*.json")
    ]
    (found,) = [m for m in manifests if m["window"] == window]
    return dict(found)


def manifest_totals(
    out: Path, window: str = DAY.isoformat(), stream: str = STREAM
) -> tuple[int, int, int]:
    """Rows out, transport and producer duplicates of the one run published for ``window``."""
    hours = manifest(out, window, stream)["hours"]
    return (
        sum(h["output_rows"] for h in hours),
        sum(h["transport"] for h in hours),
        sum(h["producer"] for h in hours),
    )
