"""``lander compact`` and ``lander analyse``: the Spark jobs from the command line.

The same parser serves ``python -m sparkjobs`` and the entry file given to
``spark-submit`` (``deploy/spark/submit.py``), so a cluster runs exactly what a laptop does.
Every flag has a ``LANDER_*`` variable; the flag wins. The flags are made from the
settings' fields (:data:`FLAGS`, ``consumer.config.add_setting_flags``).

Exit status (docs/sparkjobs.md): :data:`OK` 0 done (or already up to date),
:data:`FAILED` 1 the job failed, :data:`BAD_CONFIG` 2 bad settings or no PySpark,
:data:`EMPTY` 3 the window has no input, so there is nothing to do (0 with
``--allow-empty``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from consumer.config import ConfigError, FlagSpec, add_setting_flags, flag_values
from consumer.telemetry import configure_logging
from sparkjobs.settings import AnalyseSettings, CompactSettings, JobSettings, load

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkjobs.io import Filesystem
    from sparkjobs.session import JvmPlan

OK, FAILED, BAD_CONFIG, EMPTY = 0, 1, 2, 3
"""The jobs' exit codes."""

EXIT_CODES = """\
exit status: 0 done or already up to date, 1 failed, 2 bad settings or no PySpark,
3 nothing to do: the window has no input (0 with --allow-empty)
"""

COMPACT_HELP = """\
Compact one window of the landed archive into deduplicated Parquet.

Reads {archive}/stream=S/dt=D/hour=H/**.jsonl.gz for a day or an hour (and the dedupe
horizon before it), drops transport duplicates (same position) and producer duplicates
(same event id within the horizon), keeps each payload byte for byte, writes Parquet
partitioned by dt/hour, and publishes it atomically under
{compacted}/stream=S/_published/. Re-running a window rewrites only hours whose input
changed (late files). Bad input is counted and reported with its file; --strict fails
the window instead.

A window whose hours hold no landed object at all (a quiet stream, or a wrong
--archive) is reported in one line and exits 3 without starting Spark for a local
archive; --allow-empty makes that exit 0.

"""

ANALYSE_HELP = """\
Analyse a compacted window: volume per minute and shard, duplicates by cause,
lateness, hot partition keys, producer sequence gaps, dead letters. Writes Parquet
tables and a self-contained report.html under {reports}/stream=S/{window}/.

A window with no compacted data (never compacted, or compacted empty) is reported in
one line and exits 3, writing nothing; --allow-empty makes that exit 0.

"""


JOB_FLAGS: tuple[FlagSpec, ...] = (
    "stream",
    "compacted",
    "window",
    ("spark_master", "--master"),
    "payload_format",
)
"""Flags of both jobs, for the fields of :class:`JobSettings`."""

FLAGS: dict[str, tuple[type[JobSettings], tuple[FlagSpec, ...]]] = {
    "compact": (
        CompactSettings,
        (
            *JOB_FLAGS,
            "archive",
            ("compact_target_file_mb", "--target-file-mb"),
            ("compact_dedupe_horizon", "--dedupe-horizon"),
            ("compact_strict", "--strict"),
            ("compact_compression", "--compression"),
            ("compact_allow_empty", "--allow-empty"),
        ),
    ),
    "analyse": (
        AnalyseSettings,
        (
            *JOB_FLAGS,
            "archive",
            "reports",
            ("event_time_pointer", "--event-time-field"),
            ("sequence_pointer", "--sequence-field"),
            "top_keys",
            ("analyse_allow_empty", "--allow-empty"),
        ),
    ),
}
"""Command -> its settings class and the fields it has flags for."""


def add_commands(commands: Any) -> None:
    """Add ``compact`` and ``analyse`` to a subcommand set (``lander``'s or our own)."""
    fmt = argparse.RawDescriptionHelpFormatter
    compact = commands.add_parser(
        "compact",
        help="compact a window of the archive into Parquet (Spark)",
        description=COMPACT_HELP + EXIT_CODES,
        formatter_class=fmt,
    )
    add_setting_flags(compact, *FLAGS["compact"])

    analyse = commands.add_parser(
        "analyse",
        help="analyse a compacted window; write tables and report.html (Spark)",
        description=ANALYSE_HELP + EXIT_CODES,
        formatter_class=fmt,
    )
    add_setting_flags(analyse, *FLAGS["analyse"])


def run(args: argparse.Namespace) -> int:
    """Run the job ``args.command`` names; the exit code (:data:`OK` … :data:`EMPTY`)."""
    kind, flags = FLAGS[args.command]
    try:
        settings = load(kind, **flag_values(args, flags))
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return BAD_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(
            "lander: the Spark jobs need PySpark and Java 17+: install the spark extra "
            "(pip install '.[spark]' from a clone of the repository)",
            file=sys.stderr,
        )
        return BAD_CONFIG
    if isinstance(settings, CompactSettings):
        return _compact(settings)
    assert isinstance(settings, AnalyseSettings)
    return _analyse(settings)


def _nothing_to_do(command: str, what: str, *, allowed: bool) -> int:
    """One line on stderr; :data:`EMPTY`, or :data:`OK` when empty windows are allowed."""
    print(f"lander {command}: {what}; nothing to do", file=sys.stderr)
    return OK if allowed else EMPTY


def _filesystem(uri: str, spark: SparkSession | None) -> Filesystem:
    from sparkjobs.io import filesystem_for

    return filesystem_for(uri, spark)


def _session_to_list(
    uri: str, master: str | None, app: str, jvm: JvmPlan | None = None
) -> SparkSession | None:
    """A session only if listing ``uri`` needs one: local folders are listed without a JVM."""
    from sparkjobs.io import is_local
    from sparkjobs.session import get_session

    return None if is_local(uri) else get_session(master, app=app, jvm=jvm)


def _compact(settings: CompactSettings) -> int:
    from sparkjobs.compact import CompactionError, CompactJob, compact, has_landed_input
    from sparkjobs.io import is_local
    from sparkjobs.plan import list_inputs
    from sparkjobs.session import finish, get_session, jvm_plan
    from sparkjobs.window import Window

    job = CompactJob(
        archive=settings.archive,
        stream=settings.stream,
        window=Window.parse(settings.window),
        output=settings.compacted,
        target_file_bytes=settings.compact_target_file_mb << 20,
        horizon_minutes=settings.horizon_minutes,
        strict=settings.compact_strict,
        compression=settings.compact_compression,
        payload_format=settings.payload_format,
    )
    app = f"lander-compact-{settings.stream}"
    # A local archive is listed before the JVM starts: its size picks the JIT.
    listed = list_inputs(_filesystem(job.archive, None), job) if is_local(job.archive) else None
    size = None if listed is None else sum(f.size for files in listed.values() for f in files)
    jvm = jvm_plan(size)
    spark = _session_to_list(job.archive, settings.spark_master, app, jvm)
    if listed is not None:
        landed = any(listed.get(hour) for hour in job.window.hour_starts())
    else:
        landed = has_landed_input(_filesystem(job.archive, spark), job)
    if not landed:
        if spark is not None:
            finish(spark, jvm)
        return _nothing_to_do(
            "compact",
            f"no landed input for stream {job.stream} in window {job.window.label} "
            f"under {job.archive}",
            allowed=settings.compact_allow_empty,
        )
    spark = spark or get_session(settings.spark_master, app=app, jvm=jvm)
    try:
        manifest = compact(spark, job, listed=listed)
    except CompactionError as exc:
        print(f"lander compact: {exc}", file=sys.stderr)
        return FAILED
    finally:
        finish(spark, jvm)
    print(
        f"{job.window.label}: {manifest.status}; hours rewritten {len(manifest.stale_hours)}, "
        f"unchanged {len(manifest.unchanged_hours)}; rows in {manifest.total('input_rows')}, "
        f"out {manifest.total('output_rows')}; duplicates removed: transport "
        f"{manifest.total('transport')}, producer {manifest.total('producer')}; "
        f"bad input {len(manifest.bad_files)}; run {manifest.run_id}"
    )
    for bad in manifest.bad_files:
        print(f"  bad input: {bad.file}: {bad.kind}, {bad.lines} lines ({bad.detail})")
    return OK


def _analyse(settings: AnalyseSettings) -> int:
    from sparkjobs import compacted
    from sparkjobs.analyse import AnalyseJob, analyse
    from sparkjobs.io import join
    from sparkjobs.report import render_text
    from sparkjobs.session import finish, get_session, jvm_plan
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
        payload_format=settings.payload_format,
    )
    app = f"lander-analyse-{settings.stream}"
    jvm = jvm_plan(None)
    spark = _session_to_list(job.compacted, settings.spark_master, app, jvm)
    fs = _filesystem(job.compacted, spark)
    if not compacted.current_files(fs, job.compacted, job.stream, job.window):
        if spark is not None:
            finish(spark, jvm)
        return _nothing_to_do(
            "analyse",
            f"no compacted data for stream {job.stream} in window {job.window.label} "
            f"under {job.compacted}",
            allowed=settings.analyse_allow_empty,
        )
    spark = spark or get_session(settings.spark_master, app=app, jvm=jvm)
    try:
        analysis = analyse(spark, job)
    finally:
        finish(spark, jvm)
    print(render_text(analysis))
    print(f"report: {join(job.folder, 'report.html')}")
    return OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sparkjobs compact|analyse …`` and the spark-submit entry."""
    parser = argparse.ArgumentParser(prog="sparkjobs", description=__doc__)
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv))
