"""The operator layer: the ``lander`` command and what stands behind it.

    (this module)  the argument parser and the commands' entry points
    demo.py        the whole pipeline on the embedded local stack; reconcile.py its checks
    produce.py     the load generator (retries, KPL aggregates, bad payloads)
    status.py      the lease table as a person reads it
    harness.py     worker processes and progress lines for the demo, bench and tests
    emulators/     the embedded local AWS stack (kinesalite, moto)

It may import everything below it, and the Spark jobs (``compact``, ``analyse``);
nothing of the daemon library imports it. Flags that set a setting are made from the
settings' fields (``consumer.config.add_setting_flags``); docs/configdoc.py generates
docs/configuration.md from the settings and this parser.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from consumer.config import (
    ConfigError,
    FlagSpec,
    ProduceSettings,
    Settings,
    add_setting_flags,
    flag_values,
    load_settings,
)
from consumer.errors import EXIT_CONFIG, missing_extra
from consumer.telemetry import configure_logging

log = structlog.get_logger("consumer.cli")


DESCRIPTION = """\
kinesis-lander: consume a Kinesis stream from Python through fenced DynamoDB leases,
land it in S3 exactly once, and compact it into Parquet.

Start here:
  lander demo                 the whole pipeline on an embedded local stack (~1 min)
  lander local-stack          Kinesis, DynamoDB and S3 emulators on loopback
  lander run                  a worker; run one per container, they share the shards
  lander status               who owns which shard, checkpoints, lag
  lander produce              put test events (retries, KPL aggregates) into a stream
  lander compact, analyse     the nightly Spark jobs (Iceberg table, report)
  lander maintain             expire old snapshots, delete unreferenced files
  lander migrate-pointers     import an output published before the Iceberg table
  lander raw-table            the landed JSON Lines as a Glue/Athena table

Every setting is an environment variable LANDER_<NAME> (docs/configuration.md); a
flag overrides it. A bad or missing setting, or a LANDER_ variable that is no setting
(a typo), stops start-up with one line naming it. Choices are case-insensitive.
AWS endpoints, region and credentials come from the standard AWS variables
(AWS_REGION, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_KINESIS, ...), so pointing the daemon
at an emulator needs no extra switch: see `lander local-stack`.
"""


WORKER_FLAGS: dict[str, tuple[FlagSpec, ...]] = {
    "run": (
        "stream",
        "lease_table",
        "worker_id",
        "initial_position",
        "failover_seconds",
        "processor",
        "archive",
        "metrics_port",
    ),
    "status": ("stream", "lease_table", "failover_seconds"),
    "efo": ("stream", "lease_table", "efo_consumer"),
}
"""The fields of :class:`Settings` that ``lander run`` and ``lander status`` have flags for."""

PRODUCE_FLAGS: tuple[FlagSpec, ...] = (
    "stream",
    ("produce_count", "--count"),
    ("produce_rate", "--rate"),
    ("produce_payload_size", "--payload-size"),
    ("produce_retry_share", "--retry-share"),
    ("produce_aggregate_share", "--aggregate-share"),
    ("produce_bad_records", "--bad-records"),
    ("produce_keys", "--keys"),
    ("produce_seed", "--seed"),
)
"""The fields of :class:`ProduceSettings` that ``lander produce`` has flags for (besides
``--aggregate``, which sets the aggregate share to 1 or 0)."""


class _Version(argparse.Action):
    """``--version``: ``lander <version>`` on stdout, exit 0; reads no setting.

    The version is looked up only when asked, so building the parser stays cheap.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from consumer.metrics import version

        print(f"lander {version()}")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subcommand per job."""
    parser = argparse.ArgumentParser(
        prog="lander", description=DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run a worker (the daemon)",
        description="Run a worker until SIGTERM/SIGINT, then hand its leases off. "
        "Serves /metrics, /healthz and /readyz when LANDER_METRICS_PORT is set.",
    )
    add_setting_flags(run, Settings, WORKER_FLAGS["run"])
    run.add_argument(
        "--check",
        action="store_true",
        help="run the start-up checks (stream, lease table, archive, processor) and exit",
    )

    status = commands.add_parser(
        "status",
        help="show the lease table: shard, state, owner, checkpoint, lease age, lag",
        description="Read the lease table and the stream's shards (one Scan, one ListShards; "
        "never writes) and print one row per shard. Lag is what the owner reported with its "
        "last heartbeat; lease age is the time since the lease was last written.",
    )
    add_setting_flags(status, Settings, WORKER_FLAGS["status"])
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")

    produce = commands.add_parser(
        "produce",
        help="put test events into a stream (rate, retries, KPL aggregation)",
        description="A load generator: JSON events with an event_id, a per-key seq and an "
        "event_time, put with PutRecords at a steady rate. Producer retries re-send an "
        "event with the same event_id (Kinesis gives it a new sequence number).",
    )
    add_setting_flags(produce, ProduceSettings, PRODUCE_FLAGS)
    produce.add_argument(
        "--aggregate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pack every event into KPL aggregates (--aggregate-share for a mix)",
    )

    demo = commands.add_parser(
        "demo",
        help="run the whole pipeline on the embedded local stack and reconcile the counts",
        description="Start the local stack, a 4-shard stream and three workers; produce "
        "events with producer retries, KPL aggregates and bad payloads; kill -9 a worker "
        "and split a shard part way; wait for the archive; compact and analyse with Spark; "
        "print a report. Exits 0 only if produced, landed and compacted counts reconcile.",
    )
    demo.add_argument("--records", type=int, default=20_000, help="events (default 20000)")
    demo.add_argument("--rate", type=float, default=2_000.0, help="events/s (default 2000)")
    demo.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    demo.add_argument("--shards", type=int, default=4, help="shards (default 4)")
    demo.add_argument(
        "--workdir", default="lander-demo", help="where everything goes (default ./lander-demo)"
    )
    demo.add_argument("--master", default="local[2]", help="Spark master (default local[2])")

    from consumer.cli.efo import add_efo_command

    add_efo_command(commands, WORKER_FLAGS["efo"])

    stack = commands.add_parser(
        "local-stack",
        help="start the embedded local AWS stack (Kinesis, DynamoDB, S3) on loopback",
    )
    stack.add_argument(
        "--install", action="store_true", help="install the npm emulator packages first"
    )
    stack.add_argument(
        "--stream",
        action="append",
        default=[],
        metavar="NAME",
        help="create this stream once the stack is up (repeat for several)",
    )
    stack.add_argument("--shards", type=int, default=2, help="shards of each --stream (default 2)")
    stack.add_argument(
        "--env-file",
        metavar="PATH",
        help="also write the export lines to PATH, whole, once the stack is ready (a "
        "script waits for it and sources it)",
    )
    stack.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this S3 bucket (repeat for several). With one --stream, the export "
        "lines also set LANDER_STREAM and LANDER_LEASE_TABLE (STREAM-leases), and with a "
        "--bucket LANDER_ARCHIVE (s3://BUCKET/lander), for `lander run`",
    )

    from sparkjobs.cli import add_commands

    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lander`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "local-stack":
        return _local_stack(args)
    if args.command in ("compact", "analyse", "maintain", "migrate-pointers", "raw-table"):
        from sparkjobs.cli import run

        return run(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "produce":
        return _produce(args)
    try:
        settings = load_settings(**_overrides(args))
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    if args.command == "run":
        return asyncio.run(_run(settings, check_only=args.check))
    if args.command == "status":
        from consumer.cli.status import status_command

        return asyncio.run(status_command(settings, as_json=args.json))
    if args.command == "efo":
        from consumer.cli.efo import efo_command

        return asyncio.run(efo_command(settings, args.action))
    raise AssertionError(args.command)  # pragma: no cover


def _local_stack(args: argparse.Namespace) -> int:
    if problem := missing_extra("local", "moto"):
        print(f"lander local-stack: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    if args.shards < 1:
        print("lander local-stack: --shards must be 1 or more", file=sys.stderr)
        return EXIT_CONFIG
    from pathlib import Path
    from subprocess import CalledProcessError

    from consumer.cli import emulators

    provision = emulators.Provision(tuple(args.stream), args.shards, tuple(args.bucket))
    try:
        if args.install:
            emulators.install_node_modules()
        env_file = None if args.env_file is None else Path(args.env_file)
        return emulators.run_local_stack(provision=provision, env_file=env_file)
    except (emulators.LocalStackError, CalledProcessError) as exc:
        print(f"lander local-stack: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return flag_values(args, WORKER_FLAGS[args.command])


def _produce(args: argparse.Namespace) -> int:
    from consumer.config import load_produce_settings

    overrides = flag_values(args, PRODUCE_FLAGS)
    if args.aggregate is not None and overrides["produce_aggregate_share"] is None:
        overrides["produce_aggregate_share"] = 1.0 if args.aggregate else 0.0
    try:
        settings = load_produce_settings(**overrides)
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    return asyncio.run(_produce_async(settings))


async def _produce_async(settings: Any) -> int:
    import secrets

    from consumer.aws import Clients
    from consumer.cli.produce import Producer, ProduceSpec, ProgressLine, check_stream
    from consumer.errors import LanderError, exit_code

    spec = ProduceSpec(
        stream=settings.stream,
        count=settings.produce_count,
        rate=settings.produce_rate,
        payload_size=settings.produce_payload_size,
        retry_share=settings.produce_retry_share,
        aggregate_share=settings.produce_aggregate_share,
        bad_records=settings.produce_bad_records,
        keys=settings.produce_keys,
        run_id=secrets.token_hex(4),
        seed=settings.produce_seed,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with Clients() as clients:
        producer = Producer(clients.kinesis, spec, progress=ProgressLine())
        stopper = asyncio.create_task(_call_when(stop, producer.stop))
        try:
            await check_stream(clients.kinesis, spec.stream)
            done = await producer.run()
        except LanderError as exc:  # missing (3), unreachable or failing (1)
            print(f"lander produce: {exc}", file=sys.stderr)
            return exit_code(exc)
        finally:
            stopper.cancel()
    rate = done.user_records / done.seconds if done.seconds else 0.0
    print(
        f"produced {done.events} events, {done.retries} producer retries, {done.bad} bad "
        f"payloads ({done.user_records} user records in {done.kinesis_records} Kinesis "
        f"records, {done.aggregated_user_records} in {done.aggregates} KPL aggregates) in "
        f"{done.seconds:.1f} s, {rate:,.0f} records/s; event ids start with {spec.run_id}-"
    )
    return 0


async def _call_when(stop: asyncio.Event, action: Any) -> None:
    await stop.wait()
    action()


def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from consumer.cli.demo import DemoSpec, run_demo

    if problem := missing_extra("local,spark", "moto", "pyspark", "pyiceberg"):
        print(f"lander demo: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging("console", "warning")
    if args.records < 100 or args.rate <= 0 or args.workers < 1 or args.shards < 1:
        print(
            "lander: demo needs --records >= 100, --rate > 0, --workers >= 1, --shards >= 1",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    spec = DemoSpec(
        workdir=Path(args.workdir),
        records=args.records,
        rate=args.rate,
        workers=args.workers,
        shards=args.shards,
        spark_master=args.master,
    )
    return run_demo(spec)


async def _run(settings: Settings, *, check_only: bool = False) -> int:
    # Signals first: a SIGTERM during start-up still ends in a clean exit.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    from consumer.errors import RefusedError, UnreachableError, exit_code
    from consumer.lifecycle.assembly import run_daemon

    try:
        report = await run_daemon(settings, stop, check_only=check_only)
    except (ConfigError, RefusedError, UnreachableError) as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return exit_code(exc)
    for line in report:
        print(f"lander: {line}")
    return 0
