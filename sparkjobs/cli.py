"""``lander compact`` and ``lander analyse``: the Spark jobs from the command line.

The same parser serves ``python -m sparkjobs`` and the entry file given to
``spark-submit`` (``deploy/spark/submit.py``), so a cluster runs exactly what a laptop does.
Every flag has a ``LANDER_*`` variable; the flag wins.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from consumer.config import ConfigError
from consumer.telemetry import configure_logging
from sparkjobs.settings import AnalyseSettings, CompactSettings, JobSettings, load

COMPACT_HELP = """\
Compact one window of the landed archive into deduplicated Parquet.

Reads {archive}/stream=S/dt=D/hour=H/**.jsonl.gz for a day or an hour (and a few
minutes before it), drops transport duplicates (same position) and producer duplicates
(same event id, earliest arrival wins), writes Parquet partitioned by dt/hour, and
publishes it atomically under {compacted}/stream=S/_published/. Re-running a window
rewrites only hours whose input changed (late files). Bad input is counted and
reported with its file; --strict fails the window instead.
"""

ANALYSE_HELP = """\
Analyse a compacted window: volume per minute and shard, duplicates by cause,
lateness, hot partition keys, producer sequence gaps, dead letters. Writes Parquet
tables and a self-contained report.html under {reports}/stream=S/{window}/.
"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", help="stream name (LANDER_STREAM)")
    parser.add_argument(
        "--compacted", help="URI of the compacted Parquet (LANDER_COMPACTED), e.g. s3a://b/p"
    )
    parser.add_argument(
        "--window",
        help="a day YYYY-MM-DD or an hour YYYY-MM-DDTHH, UTC (LANDER_WINDOW; default yesterday)",
    )
    parser.add_argument(
        "--master", dest="spark_master", help="Spark master for a local run (LANDER_SPARK_MASTER)"
    )


def add_commands(commands: Any) -> None:
    """Add ``compact`` and ``analyse`` to a subcommand set (``lander``'s or our own)."""
    fmt = argparse.RawDescriptionHelpFormatter
    compact = commands.add_parser(
        "compact",
        help="compact a window of the archive into Parquet (Spark)",
        description=COMPACT_HELP,
        formatter_class=fmt,
    )
    _common(compact)
    compact.add_argument("--archive", help="URI of the landed archive (LANDER_ARCHIVE)")
    compact.add_argument(
        "--target-file-mb",
        dest="compact_target_file_mb",
        type=int,
        help="target Parquet file size (LANDER_COMPACT_TARGET_FILE_MB, default 256)",
    )
    compact.add_argument(
        "--lookback-minutes",
        dest="compact_lookback_minutes",
        type=int,
        help="minutes before the window read for producer retries (default 10)",
    )
    compact.add_argument(
        "--strict",
        dest="compact_strict",
        action="store_const",
        const=True,
        help="fail on any bad input instead of reporting it (LANDER_COMPACT_STRICT)",
    )
    compact.add_argument(
        "--compression",
        dest="compact_compression",
        help="snappy, zstd, gzip or none (LANDER_COMPACT_COMPRESSION)",
    )

    analyse = commands.add_parser(
        "analyse",
        help="analyse a compacted window; write tables and report.html (Spark)",
        description=ANALYSE_HELP,
        formatter_class=fmt,
    )
    _common(analyse)
    analyse.add_argument(
        "--archive", help="URI of the landed archive, to count dead letters (LANDER_ARCHIVE)"
    )
    analyse.add_argument(
        "--reports", help="where tables and report.html go (default {compacted}/reports)"
    )
    analyse.add_argument(
        "--event-time-field",
        dest="event_time_pointer",
        help="JSON pointer to the payload's event time, e.g. /ts (LANDER_EVENT_TIME_POINTER)",
    )
    analyse.add_argument(
        "--sequence-field",
        dest="sequence_pointer",
        help="JSON pointer to a per-producer sequence, e.g. /seq (LANDER_SEQUENCE_POINTER)",
    )
    analyse.add_argument("--top-keys", type=int, help="hot partition keys listed (default 20)")


_FLAGS = {
    "compact": (
        "stream",
        "compacted",
        "window",
        "spark_master",
        "archive",
        "compact_target_file_mb",
        "compact_lookback_minutes",
        "compact_strict",
        "compact_compression",
    ),
    "analyse": (
        "stream",
        "compacted",
        "window",
        "spark_master",
        "archive",
        "reports",
        "event_time_pointer",
        "sequence_pointer",
        "top_keys",
    ),
}


def run(args: argparse.Namespace) -> int:
    """Run the job ``args.command`` names; 0 on success, 1 on failure, 2 on bad settings."""
    kind: type[JobSettings] = CompactSettings if args.command == "compact" else AnalyseSettings
    try:
        settings = load(kind, **{name: getattr(args, name, None) for name in _FLAGS[args.command]})
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(
            "lander: the Spark jobs need PySpark and Java 17+: pip install 'kinesis-lander[spark]'",
            file=sys.stderr,
        )
        return 2
    if isinstance(settings, CompactSettings):
        return _compact(settings)
    assert isinstance(settings, AnalyseSettings)
    return _analyse(settings)


def _compact(settings: CompactSettings) -> int:
    from sparkjobs.compact import CompactionError, CompactJob, compact
    from sparkjobs.session import get_session
    from sparkjobs.window import Window

    job = CompactJob(
        archive=settings.archive,
        stream=settings.stream,
        window=Window.parse(settings.window),
        output=settings.compacted,
        target_file_bytes=settings.compact_target_file_mb << 20,
        lookback_minutes=settings.compact_lookback_minutes,
        strict=settings.compact_strict,
        compression=settings.compact_compression,
    )
    spark = get_session(settings.spark_master, app=f"lander-compact-{settings.stream}")
    try:
        manifest = compact(spark, job)
    except CompactionError as exc:
        print(f"lander compact: {exc}", file=sys.stderr)
        return 1
    print(
        f"{job.window.label}: {manifest.status}; hours rewritten {len(manifest.stale_hours)}, "
        f"unchanged {len(manifest.unchanged_hours)}; rows in {manifest.total('input_rows')}, "
        f"out {manifest.total('output_rows')}; duplicates removed: transport "
        f"{manifest.total('transport')}, producer {manifest.total('producer')}; "
        f"bad input {len(manifest.bad_files)}; run {manifest.run_id}"
    )
    for bad in manifest.bad_files:
        print(f"  bad input: {bad.file}: {bad.kind}, {bad.lines} lines ({bad.detail})")
    return 0


def _analyse(settings: AnalyseSettings) -> int:
    from sparkjobs.analyse import AnalyseJob, analyse
    from sparkjobs.io import join
    from sparkjobs.report import render_text
    from sparkjobs.session import get_session
    from sparkjobs.window import Window

    job = AnalyseJob(
        compacted=settings.compacted,
        stream=settings.stream,
        window=Window.parse(settings.window),
        reports=settings.reports or join(settings.compacted, "reports"),
        archive=settings.archive,
        event_time_pointer=settings.event_time_pointer,
        sequence_pointer=settings.sequence_pointer,
        top_keys=settings.top_keys,
    )
    spark = get_session(settings.spark_master, app=f"lander-analyse-{settings.stream}")
    analysis = analyse(spark, job)
    print(render_text(analysis))
    print(f"report: {join(job.folder, 'report.html')}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sparkjobs compact|analyse …`` and the spark-submit entry."""
    parser = argparse.ArgumentParser(prog="sparkjobs", description=__doc__)
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv))
