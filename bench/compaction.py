"""Compaction of a production-like day: the Spark job against DuckDB, fixed and per-row.

The archive is :mod:`bench.prodlike`'s: one object per shard-minute run over a daily
traffic curve, every payload shape producers send, transport copies, producer retries
seconds to hours apart, late objects (both phases are written; a from-scratch run sees
them all). Damaged objects are left out: DuckDB cannot read a truncated gzip stream,
and the comparison must be of the same work. Two sizes, about 200k and 2M lines
(``--quick``: the small archive of ~2k lines only; ``BENCH_COMPACTION_SIZES=200k`` picks
sizes).

Each engine is measured twice per size:

- **fixed**: a window of one object of three lines, what any run pays whatever its size:
  for Spark a fresh ``lander compact`` process (Python, the JVM and its session,
  listing, planning, the first job's class loading and JIT);
- **the day**: the whole window, again in a fresh process for Spark, as a nightly run.

Spark's runs start from an AppCDS class archive built first, once, by the script the
Spark image's build runs (deploy/docker/class_archive.py; its cost is reported, not
counted), and choose C1-only JIT below 64 MiB of input, as ``lander compact`` does
(sparkjobs/session.py).

Per-row cost is (day - fixed) / lines. A no-op Spark run (the day again, up to date:
list, compare, publish nothing) is reported too. DuckDB runs in this process
(:mod:`bench.compaction_duckdb`, the same model: text read, payload sliced, the horizon
rule, Parquet by dt/hour).

CPU of a fresh process is counted with this process as the child subreaper: the JVM
PySpark starts is not waited for by its Python parent, so without it the JVM's CPU
would be lost at exit. Both engines must agree with :mod:`bench.prodlike_truth` on
rows out and on duplicates by cause, or the run fails. Target (issue 20): a 200k-line
day at most 6x DuckDB's CPU in a fresh process.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.compaction_duckdb import compact_with_duckdb
from bench.prodlike import DAY, STREAM, generate
from bench.prodlike_truth import read_archive, truth
from bench.report import progress

TARGET_RATIO = 6.0
SIZES_FULL = ("200k", "2M")
SIZES_QUICK = ("small",)
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
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


def _fresh_process(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
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


def _lander_compact(archive: Path, out: Path, window: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "consumer.cli",
        "compact",
        "--stream",
        STREAM,
        "--archive",
        f"file://{archive}",
        "--compacted",
        f"file://{out}",
        "--window",
        window,
    ]


def _environment(class_archive: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANDER_")}
    env["LANDER_SPARK_MASTER"] = "local[2]"
    env["LANDER_LOG_FORMAT"] = "json"
    env["LANDER_SPARK_CDS"] = str(class_archive)
    return env


def _class_archive(path: Path, env: dict[str, str]) -> dict[str, float]:
    """Build the AppCDS archive as the Spark image does, once, before any measured run."""
    script = Path(__file__).resolve().parents[1] / "deploy" / "docker" / "class_archive.py"
    progress("compaction: building the class archive (once, as the image build does)")
    wall, cpu, _ = _fresh_process([sys.executable, str(script), str(path)], env)
    return {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}


def _manifest_totals(out: Path) -> tuple[int, int, int]:
    """Rows out, transport and producer duplicates of the one published run."""
    (path,) = (out / f"stream={STREAM}" / "_manifests").glob("*.json")
    hours = json.loads(path.read_text())["hours"]
    return (
        sum(h["output_rows"] for h in hours),
        sum(h["transport"] for h in hours),
        sum(h["producer"] for h in hours),
    )


def _tiny_archive(root: Path) -> None:
    """One object of three lines: the fixed cost's window."""
    folder = root / f"stream={STREAM}/dt={DAY}/hour=10/minute=00/shard=shardId-000000000000"
    folder.mkdir(parents=True)
    lines = [
        f'{{"stream":"{STREAM}","shard_id":"shardId-000000000000","sequence_number":"{n}",'
        f'"subsequence_number":0,"partition_key":"p","arrival_ts":"{DAY}T10:00:0{n}.000Z",'
        f'"event_id":"e{n}","data":{{"n":{n}}}}}\n'
        for n in (1, 2, 3)
    ]
    (folder / "1-3.jsonl.gz").write_bytes(gzip.compress("".join(lines).encode()))


def _measure_in_process(work: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = _self_cpu(), time.monotonic()
    result = work()
    return result, time.monotonic() - wall, _self_cpu() - cpu


def _size(work: Path, size: str, env: dict[str, str]) -> dict[str, Any]:
    archive, window = work / "archive", DAY.isoformat()
    progress(f"compaction {size}: generating the archive")
    made = generate(archive, size, seed=1, damaged=False)
    expected = truth(read_archive(archive, STREAM, keep_data=False), window)
    want = (expected.kept, expected.transport, expected.producer)
    gzip_bytes = sum(p.stat().st_size for p in archive.rglob("*.jsonl.gz"))
    lines = expected.kept + expected.transport + expected.producer + expected.malformed

    progress(f"compaction {size}: DuckDB")
    duck, duck_wall, duck_cpu = _measure_in_process(
        lambda: compact_with_duckdb(archive, STREAM, DAY, work / "duck", threads=2)
    )
    got = (duck.rows_out, duck.transport_duplicates, duck.producer_duplicates)
    if got != want:
        raise AssertionError(f"DuckDB and the model disagree on {size}: {got} != {want}")

    progress(f"compaction {size}: Spark, a fresh lander compact")
    spark_wall, spark_cpu, _ = _fresh_process(_lander_compact(archive, work / "spark", window), env)
    got = _manifest_totals(work / "spark")
    if got != want:
        raise AssertionError(f"Spark and the model disagree on {size}: {got} != {want}")
    progress(f"compaction {size}: Spark, the same day again (up to date)")
    noop_wall, noop_cpu, _ = _fresh_process(_lander_compact(archive, work / "spark", window), env)
    return {
        "archive": {
            "objects": len(made.objects),
            "lines": lines,
            "output_rows": expected.kept,
            "transport_duplicates": expected.transport,
            "producer_duplicates": expected.producer,
            "gzip_bytes": gzip_bytes,
        },
        "duckdb": {"wall_seconds": round(duck_wall, 2), "cpu_seconds": round(duck_cpu, 2)},
        "spark": {"wall_seconds": round(spark_wall, 2), "cpu_seconds": round(spark_cpu, 2)},
        "spark_noop": {"wall_seconds": round(noop_wall, 2), "cpu_seconds": round(noop_cpu, 2)},
    }


def _fixed(work: Path, env: dict[str, str]) -> dict[str, Any]:
    archive = work / "archive"
    _tiny_archive(archive)
    progress("compaction: fixed cost, DuckDB on one object")
    _, duck_wall, duck_cpu = _measure_in_process(
        lambda: compact_with_duckdb(archive, STREAM, DAY, work / "duck", threads=2)
    )
    progress("compaction: fixed cost, a fresh lander compact of one object")
    wall, cpu, _ = _fresh_process(_lander_compact(archive, work / "spark", f"{DAY}T10"), env)
    return {
        "duckdb": {"wall_seconds": round(duck_wall, 2), "cpu_seconds": round(duck_cpu, 3)},
        "spark": {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)},
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Fixed cost, then each size, Spark against DuckDB."""
    _become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="lander-bench-compaction-"))
    env = _environment(root / "spark-classes.jsa")
    try:
        built = _class_archive(root / "spark-classes.jsa", env)
        fixed = _fixed(root / "fixed", env)
        chosen = os.environ.get("BENCH_COMPACTION_SIZES")
        names = chosen.split(",") if chosen else (SIZES_QUICK if quick else SIZES_FULL)
        sizes = {size: _size(root / size, size, env) for size in names}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for found in sizes.values():
        lines = found["archive"]["lines"]
        for engine in ("duckdb", "spark"):
            per_row = (found[engine]["cpu_seconds"] - fixed[engine]["cpu_seconds"]) / lines
            found[engine]["per_row_us"] = round(per_row * 1e6, 2)
        found["cpu_ratio"] = round(
            found["spark"]["cpu_seconds"] / found["duckdb"]["cpu_seconds"], 2
        )
    return {
        "class_archive": built,
        "fixed": fixed,
        "sizes": sizes,
        "target_cpu_ratio": TARGET_RATIO,
    }


def render(result: dict[str, Any]) -> str:
    """A readable table."""
    fixed = result["fixed"]
    built = result.get("class_archive")
    lines = [
        f"class archive built once (not counted below): {built['cpu_seconds']:.1f} CPU-s"
        if built
        else "no class archive",
        f"fixed cost (one object of 3 lines): Spark {fixed['spark']['cpu_seconds']:.1f} CPU-s "
        f"({fixed['spark']['wall_seconds']:.1f} s wall, a fresh lander compact); "
        f"DuckDB {fixed['duckdb']['cpu_seconds']:.2f} CPU-s",
    ]
    for size, found in result["sizes"].items():
        a = found["archive"]
        lines.append(
            f"{size}: {a['objects']:,} objects, {a['lines']:,} lines, "
            f"{a['output_rows']:,} rows out "
            f"(transport {a['transport_duplicates']:,}, producer {a['producer_duplicates']:,}), "
            f"{a['gzip_bytes'] / 2**20:,.1f} MiB gzip"
        )
        lines.append(f"  {'engine':<26}{'wall s':>8}{'CPU s':>8}{'per row (us)':>14}")
        for name, label in (
            ("duckdb", "DuckDB (in process)"),
            ("spark", "Spark (fresh process)"),
            ("spark_noop", "Spark no-op (up to date)"),
        ):
            e = found[name]
            per_row = f"{e['per_row_us']:>14.2f}" if "per_row_us" in e else f"{'':>14}"
            lines.append(f"  {label:<26}{e['wall_seconds']:>8.1f}{e['cpu_seconds']:>8.1f}{per_row}")
        verdict = "met" if found["cpu_ratio"] <= result["target_cpu_ratio"] else "MISSED"
        target = f"target <= {result['target_cpu_ratio']}x: {verdict}"
        lines.append(
            f"  Spark / DuckDB CPU: {found['cpu_ratio']:.2f}x "
            f"({target if size == '200k' else 'reported; the target is for 200k'})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run("--quick" in sys.argv)))
