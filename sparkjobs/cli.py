"""``lander compact`` and ``lander analyse``: the Spark jobs from the command line.

The same parser serves ``python -m sparkjobs`` and the entry file given to
``spark-submit`` (``deploy/spark/submit.py``), so a cluster runs exactly what a laptop does.
Every flag has a ``LANDER_*`` variable; the flag wins. The flags are made from the
settings' fields (:data:`FLAGS`, ``consumer.config.add_setting_flags``).

Exit status (docs/sparkjobs.md): :data:`OK` 0 done (or already up to date),
:data:`FAILED` 1 the job failed, :data:`BAD_CONFIG` 2 bad settings or no PySpark,
:data:`EMPTY` 3 the window has no input, so there is nothing to do (0 with
``--allow-empty``), :data:`BAD_INPUT` 4 compacted, but some input could not be read
(0 with ``--allow-bad-input``). Several streams and windows run in one session; the
exit code is the worst of theirs (:func:`_worst`: 1, then 4, then 3, then 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import consumer.errors
from consumer.config import ConfigError, FlagSpec, add_setting_flags, flag_values
from consumer.telemetry import configure_logging
from sparkjobs.helptext import (
    ANALYSE_HELP,
    COMPACT_HELP,
    EXIT_CODES,
    MAINTAIN_HELP,
    MIGRATE_HELP,
    RAW_TABLE_HELP,
    TABLE_EXIT_CODES,
)
from sparkjobs.settings import (
    AnalyseSettings,
    CompactSettings,
    MaintainSettings,
    RawTableSettings,
    StreamSettings,
    TableSettings,
    load,
)

if TYPE_CHECKING:
    from datetime import datetime

    from pyspark.sql import SparkSession

    from sparkjobs.analysis.analyse import AnalyseJob
    from sparkjobs.compaction.compact import CompactJob
    from sparkjobs.compaction.plan import ByHour
    from sparkjobs.compaction.runmetrics import WindowRun
    from sparkjobs.io import Filesystem
    from sparkjobs.session import JvmPlan

    Listing = tuple[datetime, ByHour]
    """When a window's inputs were listed, and the listing."""

OK, FAILED, BAD_CONFIG, EMPTY, BAD_INPUT = (
    consumer.errors.EXIT_OK,
    consumer.errors.EXIT_FAILED,
    consumer.errors.EXIT_CONFIG,
    consumer.errors.EXIT_MISSING,
    consumer.errors.EXIT_BAD_INPUT,
)
"""The jobs' exit codes (the one table in consumer.errors)."""

JOB_FLAGS: tuple[FlagSpec, ...] = (
    "stream",
    "compacted",
    "window",
    ("spark_master", "--master"),
    "payload_format",
    "catalog",
    "table",
    ("event_time_pointer", "--event-time-field"),
)
"""Flags of both jobs, for the fields of :class:`JobSettings`."""

FLAGS: dict[str, tuple[type[StreamSettings], tuple[FlagSpec, ...]]] = {
    "compact": (
        CompactSettings,
        (
            *JOB_FLAGS,
            "archive",
            ("compact_target_file_mb", "--target-file-mb"),
            ("compact_dedupe_horizon", "--dedupe-horizon"),
            ("compact_strict", "--strict"),
            ("compact_compression", "--compression"),
            ("compact_partition", "--partition"),
            ("compact_allow_empty", "--allow-empty"),
            ("compact_allow_bad_input", "--allow-bad-input"),
            ("sequence_pointer", "--sequence-field"),
            "pushgateway",
        ),
    ),
    "analyse": (
        AnalyseSettings,
        (
            *JOB_FLAGS,
            "archive",
            "reports",
            ("sequence_pointer", "--sequence-field"),
            "top_keys",
            ("analyse_allow_empty", "--allow-empty"),
        ),
    ),
    "maintain": (
        MaintainSettings,
        ("stream", "compacted", "catalog", "table", "snapshot_retention", "orphan_age"),
    ),
    "migrate-pointers": (TableSettings, ("stream", "compacted", "catalog", "table")),
    "raw-table": (
        RawTableSettings,
        ("stream", "archive", "raw_database", "raw_table", "raw_days"),
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

    maintain = commands.add_parser(
        "maintain",
        help="expire old snapshots of the compacted tables, delete unreferenced files",
        description=MAINTAIN_HELP + TABLE_EXIT_CODES,
        formatter_class=fmt,
    )
    add_setting_flags(maintain, *FLAGS["maintain"])

    migrate = commands.add_parser(
        "migrate-pointers",
        help="import an output published by pointer files (before the table) into it",
        description=MIGRATE_HELP + TABLE_EXIT_CODES,
        formatter_class=fmt,
    )
    add_setting_flags(migrate, *FLAGS["migrate-pointers"])

    raw = commands.add_parser(
        "raw-table",
        help="register the landed JSON Lines as a Glue/Athena table (partition projection)",
        description=RAW_TABLE_HELP + TABLE_EXIT_CODES,
        formatter_class=fmt,
    )
    add_setting_flags(raw, *FLAGS["raw-table"])


EXTRA_MODULES = {
    "raw-table": ("pyiceberg", "boto3"),
    "maintain": ("pyiceberg",),
    "migrate-pointers": ("pyiceberg",),
}
"""What each command imports of the spark extra (compact and analyse: PySpark too)."""


def run(args: argparse.Namespace) -> int:
    """Run the job ``args.command`` names; the exit code (:data:`OK` … :data:`EMPTY`)."""
    kind, flags = FLAGS[args.command]
    needed = EXTRA_MODULES.get(args.command, ("pyspark", "pyiceberg"))
    if problem := consumer.errors.missing_extra("spark", *needed):
        print(f"lander {args.command}: {problem}", file=sys.stderr)
        return BAD_CONFIG
    try:
        settings = load(kind, **flag_values(args, flags))
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return BAD_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    if isinstance(settings, RawTableSettings):
        from sparkjobs.table.rawtable import register_all

        return _worst(register_all(settings))
    assert isinstance(settings, TableSettings)
    from sparkjobs.catalog import check_catalogs  # before Spark: a bad catalog is one line

    problem = check_catalogs(settings.compacted, settings.streams, settings.catalog, settings.table)
    if problem:
        print(f"lander: {problem}", file=sys.stderr)
        return BAD_CONFIG
    if isinstance(settings, MaintainSettings):
        from sparkjobs.table.maintain import maintain_all

        return _worst(maintain_all(settings))
    if args.command == "migrate-pointers":
        from sparkjobs.table.migrate import migrate_all

        return _worst(migrate_all(settings))
    from sparkjobs.compaction.objectreader import setting_problem
    from sparkjobs.table.declared import declared_problem

    if problem := setting_problem() or declared_problem(settings):
        print(f"lander: {problem}", file=sys.stderr)
        return BAD_CONFIG
    if isinstance(settings, CompactSettings):
        return _compact(settings)
    assert isinstance(settings, AnalyseSettings)
    return _analyse(settings)


def _nothing_to_do(command: str, what: str, *, allowed: bool) -> int:
    """One line on stderr; :data:`EMPTY`, or :data:`OK` when empty windows are allowed."""
    print(f"lander {command}: {what}; nothing to do", file=sys.stderr)
    return OK if allowed else EMPTY


def _worst(codes: list[int]) -> int:
    """One exit code for several windows: a failure first, then bad input, then an
    empty window."""
    for code in (FAILED, BAD_INPUT, EMPTY):
        if code in codes:
            return code
    return OK


def _filesystem(uri: str, spark: SparkSession | None) -> Filesystem:
    from sparkjobs.io import filesystem_for

    return filesystem_for(uri, spark)


class _Session:
    """The one Spark session of a run, started when a window first needs it."""

    def __init__(self, master: str | None, app: str, jvm: JvmPlan) -> None:
        self.master, self.app, self.jvm = master, app, jvm
        self.spark: SparkSession | None = None

    def to_list(self, uri: str) -> SparkSession | None:
        """A session only if listing ``uri`` needs one: local folders are listed without."""
        from sparkjobs.io import is_local

        return None if is_local(uri) else self.get()

    def get(self) -> SparkSession:
        from sparkjobs.session import get_session

        if self.spark is None:
            self.spark = get_session(self.master, app=self.app, jvm=self.jvm)
        return self.spark

    def finish(self) -> None:
        from sparkjobs.session import finish

        if self.spark is not None:
            finish(self.spark, self.jvm)


def _compact(settings: CompactSettings) -> int:
    """Every stream and window of ``settings``, one after another, in one session."""
    from sparkjobs.compaction.job import jobs_of
    from sparkjobs.compaction.plan import list_window
    from sparkjobs.io import is_local
    from sparkjobs.session import jvm_plan

    jobs = jobs_of(settings)
    # A local archive is listed before the JVM starts: its size picks the JIT, and a run
    # with nothing to read starts no JVM. The first window's listing is used as it is;
    # later windows list their own hours again when their turn comes (late files), and
    # take horizon hours an earlier window held from the listing it was compacted from.
    known: dict[str, ByHour] = {}
    first: Listing | None = None
    size: int | None = None
    if all(is_local(job.archive) for job in jobs):
        listings = [list_window(_filesystem(job.archive, None), job, known) for job in jobs]
        first = listings[0]
        size = sum(f.size for _, by_hour in listings for files in by_hour.values() for f in files)
    session = _Session(settings.spark_master, f"lander-compact-{settings.stream}", jvm_plan(size))
    runs: list[WindowRun] = []
    try:
        for index, job in enumerate(jobs):
            listing = first if index == 0 else None
            runs.append(_compact_window(job, settings, session, listing, known))
    finally:
        session.finish()
    if settings.pushgateway:
        _push(settings.pushgateway, runs)
    return _worst([run.code for run in runs])


def _push(gateway: str, runs: list[WindowRun]) -> None:
    """The run's series to the Pushgateway; a failure is one warning line, no more."""
    import time

    import structlog

    from sparkjobs.compaction.runmetrics import push_runs

    streams = dict.fromkeys(run.stream for run in runs)
    codes = {s: _worst([run.code for run in runs if run.stream == s]) for s in streams}
    failed = push_runs(gateway, runs, codes, time.time())
    if failed:
        structlog.get_logger("sparkjobs.cli").warning(
            "metrics push failed; the exit code is the job's", pushgateway=gateway, error=failed
        )


def _compact_window(
    job: CompactJob,
    settings: CompactSettings,
    session: _Session,
    listing: Listing | None,
    known: dict[str, ByHour],
) -> WindowRun:
    """One stream's window: its result line, its exit code and manifest."""
    from sparkjobs.compaction.compact import CompactionError, compact, has_landed_input
    from sparkjobs.compaction.plan import list_window
    from sparkjobs.compaction.runmetrics import WindowRun
    from sparkjobs.io import is_local

    if listing is None and is_local(job.archive):
        listing = list_window(_filesystem(job.archive, None), job, known)
    if listing is not None:
        landed = any(listing[1].get(hour) for hour in job.window.hour_starts())
    else:
        landed = has_landed_input(_filesystem(job.archive, session.to_list(job.archive)), job)
    label = job.window.label
    if not landed:
        return WindowRun(
            job.stream,
            label,
            _nothing_to_do(
                "compact",
                f"no landed input for stream {job.stream} in window {label} under {job.archive}",
                allowed=settings.compact_allow_empty,
            ),
        )
    listed_at, listed = listing if listing is not None else (None, None)
    try:
        manifest = compact(session.get(), job, now=listed_at, listed=listed)
    except CompactionError as exc:
        print(f"lander compact: {job.stream} {label}: {exc}", file=sys.stderr)
        return WindowRun(job.stream, label, FAILED)
    print(
        f"{job.stream} {job.window.label}: {manifest.status}; "
        f"hours rewritten {len(manifest.stale_hours)}, "
        f"unchanged {len(manifest.unchanged_hours)}; rows in {manifest.total('input_rows')}, "
        f"out {manifest.total('output_rows')}; duplicates removed: transport "
        f"{manifest.total('transport')}, producer {manifest.total('producer')}"
        f"{_sequence_count(manifest.total('sequence'), job.sequence_pointer)}; "
        f"bad input {len(manifest.bad_files)}; run {manifest.run_id}",
        flush=True,
    )
    for bad in manifest.bad_files:
        print(f"  bad input: {bad.file}: {bad.kind}, {bad.lines} lines ({bad.detail})")
    if not manifest.bad_files or settings.compact_allow_bad_input:
        return WindowRun(job.stream, label, OK, manifest)
    print(
        f"lander compact: {job.stream} {label}: {len(manifest.bad_files)} bad input file(s), "
        "listed on stdout; the readable rest is published (--allow-bad-input: exit 0)",
        file=sys.stderr,
    )
    return WindowRun(job.stream, label, BAD_INPUT, manifest)


def _sequence_count(count: int, pointer: str | None) -> str:
    """The sequence duplicates of the result line, when the run deduped by sequence."""
    return f", sequence {count}" if pointer else ""


def _analyse(settings: AnalyseSettings) -> int:
    """Every stream and window of ``settings``, one after another, in one session."""
    from sparkjobs.analysis.analyse import AnalyseJob
    from sparkjobs.io import join
    from sparkjobs.session import jvm_plan

    own = {stream: settings.for_stream(stream) for stream in settings.streams}
    jobs = [
        AnalyseJob(
            compacted=settings.compacted,
            stream=stream,
            window=window,
            reports=settings.reports or join(settings.compacted, "reports"),
            archive=own[stream].archive,
            event_time_pointer=own[stream].event_time_pointer,
            sequence_pointer=own[stream].sequence_pointer,
            top_keys=settings.top_keys,
            payload_format=own[stream].payload_format,
            catalog=settings.catalog,
            table=settings.table,
        )
        for stream, window in settings.runs()
    ]
    session = _Session(settings.spark_master, f"lander-analyse-{settings.stream}", jvm_plan(None))
    try:
        return _worst([_analyse_window(job, settings, session) for job in jobs])
    finally:
        session.finish()


def _analyse_window(job: AnalyseJob, settings: AnalyseSettings, session: _Session) -> int:
    from sparkjobs.analysis.analyse import analyse
    from sparkjobs.analysis.report import render_text
    from sparkjobs.io import join
    from sparkjobs.table import compacted

    if not compacted.current_files(job.ref, job.window):
        return _nothing_to_do(
            "analyse",
            f"no compacted data for stream {job.stream} in window {job.window.label} "
            f"under {job.compacted}",
            allowed=settings.analyse_allow_empty,
        )
    analysis = analyse(session.get(), job)
    print(render_text(analysis))
    print(f"report: {join(job.folder, 'report.html')}", flush=True)
    return OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sparkjobs compact|analyse …`` and the spark-submit entry."""
    parser = argparse.ArgumentParser(prog="sparkjobs", description=__doc__)
    add_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv))
