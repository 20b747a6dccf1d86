"""Compaction of a generated day: the Spark job against DuckDB doing the same, same run.

One archive (bench/archives.py: real keys, real lines, transport copies,
producer re-sends, KPL aggregates) is compacted three times:

1. DuckDB, in this process (:mod:`bench.compaction_duckdb`): read with a schema, dedupe
   in one window step, write Parquet by dt/hour;
2. the Spark job in a fresh ``local[2]`` JVM (cold: what a nightly run pays);
3. the Spark job again in the same JVM (warm).

CPU seconds are counted for this process and every process under it (the JVM and its
Python workers, via /proc), so Spark's work outside Python counts. Both engines must
agree on rows out and on duplicates by cause, or the run fails. Target:
Spark at most 1.5x DuckDB's CPU on this 2-core machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from bench.archives import generate_archive
from bench.compaction_duckdb import compact_with_duckdb
from bench.report import progress

DAY = date(2026, 11, 21)
STREAM = "orders"
TARGET_RATIO = 1.5
_TICKS = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> float:
    """CPU of ``root`` and its descendants, including their reaped children."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        pid = int(entry.name)
        stats[pid] = fields
        children.setdefault(int(fields[1]), []).append(pid)
    total = 0
    pending = [root]
    while pending:
        pid = pending.pop()
        found = stats.get(pid)
        if found is not None:
            # utime, stime, cutime, cstime: fields 14-17 of stat, 11-14 after the name.
            total += sum(int(value) for value in found[11:15])
        pending.extend(children.get(pid, []))
    return total / _TICKS


def _measure(work: Any) -> tuple[Any, float, float]:
    """Run ``work()``; its result, wall seconds and CPU seconds of the process tree."""
    cpu = _tree_cpu_seconds(os.getpid())
    wall = time.monotonic()
    result = work()
    return result, time.monotonic() - wall, _tree_cpu_seconds(os.getpid()) - cpu


def run(quick: bool = False) -> dict[str, Any]:
    """Generate the day, compact it with both engines, compare."""
    from sparkjobs.compact import CompactJob, compact
    from sparkjobs.session import get_session
    from sparkjobs.window import Window

    shape = (
        {"hours": [0, 1], "shards": 2, "records_per_minute": 200}
        if quick
        else {"hours": list(range(24)), "shards": 2, "records_per_minute": 700}
    )
    work = Path(tempfile.mkdtemp(prefix="lander-bench-compaction-"))
    try:
        progress("compaction: generating the archive")
        began = time.monotonic()
        truth = generate_archive(
            work / "archive",
            stream=STREAM,
            day=DAY,
            records_per_file=1_000,
            payload_bytes=300,
            transport_duplicate_share=0.01,
            producer_duplicate_share=0.01,
            aggregated_share=0.1,
            seed=11,
            **shape,  # type: ignore[arg-type]
        )
        generated = time.monotonic() - began
        files = len(truth.files)
        json_bytes = sum(
            p.stat().st_size for p in (work / "archive").rglob("*.jsonl.gz")
        )  # compressed size; the JSON is about 4.5x
        progress(f"compaction: {files} files, {truth.readable_lines} lines; DuckDB")
        duck, duck_wall, duck_cpu = _measure(
            lambda: compact_with_duckdb(work / "archive", STREAM, DAY, work / "duck", threads=2)
        )
        progress("compaction: Spark, cold JVM")
        spark_holder: dict[str, Any] = {}

        def spark_run(out: str) -> Any:
            if "session" not in spark_holder:
                spark_holder["session"] = get_session("local[2]", app="bench-compaction")
            job = CompactJob(
                f"file://{work / 'archive'}",
                STREAM,
                Window.parse(DAY.isoformat()),
                f"file://{work / out}",
            )
            return compact(spark_holder["session"], job)

        cold, cold_wall, cold_cpu = _measure(lambda: spark_run("spark-cold"))
        progress("compaction: Spark, warm JVM")
        warm, warm_wall, warm_cpu = _measure(lambda: spark_run("spark-warm"))
        spark_holder["session"].stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for name, manifest in (("cold", cold), ("warm", warm)):
        got = (
            manifest.total("output_rows"),
            manifest.total("transport"),
            manifest.total("producer"),
        )
        want = (duck.rows_out, duck.transport_duplicates, duck.producer_duplicates)
        if got != want:
            raise AssertionError(f"Spark ({name}) and DuckDB disagree: {got} != {want}")
    rows = truth.readable_lines
    return {
        "day": {
            "files": files,
            "input_rows": rows,
            "output_rows": duck.rows_out,
            "transport_duplicates": duck.transport_duplicates,
            "producer_duplicates": duck.producer_duplicates,
            "gzip_bytes": json_bytes,
            "generated_seconds": round(generated, 1),
        },
        "duckdb": _engine(rows, duck_wall, duck_cpu),
        "spark_cold": {**_engine(rows, cold_wall, cold_cpu), "timings": cold.timings},
        "spark_warm": {**_engine(rows, warm_wall, warm_cpu), "timings": warm.timings},
        "cpu_ratio_cold": round(cold_cpu / duck_cpu, 2),
        "cpu_ratio_warm": round(warm_cpu / duck_cpu, 2),
        "target_cpu_ratio": TARGET_RATIO,
    }


def _engine(rows: int, wall: float, cpu: float) -> dict[str, float]:
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "rows_per_second": round(rows / wall),
        "rows_per_cpu_second": round(rows / cpu),
    }


def render(result: dict[str, Any]) -> str:
    """A readable table."""
    day = result["day"]
    lines = [
        f"compaction of one generated day: {day['files']:,} files, {day['input_rows']:,} rows "
        f"in, {day['output_rows']:,} out (transport {day['transport_duplicates']:,}, "
        f"producer {day['producer_duplicates']:,}), {day['gzip_bytes'] / 2**20:,.0f} MiB gzip",
        f"  {'engine':<18}{'wall s':>8}{'CPU s':>8}{'rows/s':>11}{'rows/CPU-s':>12}",
    ]
    for name in ("duckdb", "spark_cold", "spark_warm"):
        e = result[name]
        lines.append(
            f"  {name:<18}{e['wall_seconds']:>8.1f}{e['cpu_seconds']:>8.1f}"
            f"{e['rows_per_second']:>11,}{e['rows_per_cpu_second']:>12,}"
        )
    for kind in ("cold", "warm"):
        ratio = result[f"cpu_ratio_{kind}"]
        verdict = "met" if ratio <= result["target_cpu_ratio"] else "MISSED"
        lines.append(
            f"  Spark {kind} / DuckDB CPU: {ratio:.2f}x (target <= "
            f"{result['target_cpu_ratio']}x: {verdict})"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run()))
