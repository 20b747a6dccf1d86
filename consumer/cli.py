"""The ``lander`` command."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from typing import Any

import structlog

from consumer.config import ConfigError, Settings, load_settings
from consumer.telemetry import configure_logging

log = structlog.get_logger("consumer.cli")

DESCRIPTION = """\
kinesis-lander: consume a Kinesis stream from Python through fenced DynamoDB leases.

Every setting is an environment variable LANDER_<NAME> (see docs/configuration.md);
a flag overrides it. AWS endpoints, region and credentials come from the standard AWS
variables (AWS_REGION, AWS_ENDPOINT_URL_KINESIS, ...), so `eval "$(lander local-stack
--print-env)"`-style setups need no extra switch.
"""


def _settings_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", help="Kinesis stream name (LANDER_STREAM)")
    parser.add_argument("--lease-table", help="DynamoDB lease table (LANDER_LEASE_TABLE)")
    parser.add_argument("--worker-id", help="name of this worker (LANDER_WORKER_ID)")
    parser.add_argument(
        "--initial-position",
        help="TRIM_HORIZON, LATEST or an ISO-8601 time (LANDER_INITIAL_POSITION)",
    )
    parser.add_argument(
        "--failover-seconds", type=float, help="lease expiry (LANDER_FAILOVER_SECONDS)"
    )
    parser.add_argument("--processor", help="record processor as module:Class (LANDER_PROCESSOR)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subcommand per job."""
    parser = argparse.ArgumentParser(
        prog="lander", description=DESCRIPTION, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run a worker (the daemon)")
    _settings_flags(run)

    stack = commands.add_parser(
        "local-stack",
        help="start the embedded local AWS stack (Kinesis, DynamoDB, S3) on loopback",
    )
    stack.add_argument(
        "--install", action="store_true", help="install the npm emulator packages first"
    )

    from sparkjobs.cli import add_commands

    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lander`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "local-stack":
        from consumer import emulators

        if args.install:
            emulators.install_node_modules()
        return emulators.run_local_stack()
    if args.command in ("compact", "analyse"):
        from sparkjobs.cli import run

        return run(args)
    try:
        settings = load_settings(**_overrides(args))
    except ConfigError as exc:
        print(f"lander: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    if args.command == "run":
        return asyncio.run(_run(settings))
    raise AssertionError(args.command)  # pragma: no cover


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = ("stream", "lease_table", "worker_id", "initial_position", "failover_seconds")
    return {name: getattr(args, name, None) for name in (*names, "processor", "archive")}


async def _run(settings: Settings) -> int:
    # Signals first: a SIGTERM during start-up still ends in a clean exit.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    from consumer.aws import Clients
    from consumer.health import HealthServer
    from consumer.kinesis import KinesisStream
    from consumer.leases.dynamo import DynamoLeaseStore
    from consumer.metrics import LanderMetrics
    from consumer.processor import WorkerContext, load_processor
    from consumer.worker import Worker, tune_gc

    async with Clients() as clients:
        context = WorkerContext(settings, clients, LanderMetrics())
        try:
            factory = load_processor(settings.processor, context)
        except ConfigError as exc:
            print(f"lander: {exc}", file=sys.stderr)
            return 2
        except (ImportError, ValueError) as exc:
            print(f"lander: LANDER_PROCESSOR {settings.processor}: {exc}", file=sys.stderr)
            return 2
        worker = Worker(
            settings,
            DynamoLeaseStore(clients.dynamodb, settings.lease_table),
            KinesisStream(clients.kinesis, settings.stream),
            factory,
            metrics=context.metrics,
        )
        server = None
        if settings.metrics_port is not None:
            server = HealthServer(
                context.metrics, worker.health, settings.metrics_host, settings.metrics_port
            )
            try:
                await server.start()
            except OSError as exc:
                print(
                    f"lander: LANDER_METRICS_PORT {settings.metrics_port} on "
                    f"{settings.metrics_host}: {exc.strerror or exc}",
                    file=sys.stderr,
                )
                return 2
        tune_gc()
        stopper = asyncio.create_task(_stop_when(stop, worker))
        try:
            await worker.run()
        finally:
            stopper.cancel()
            if server is not None:
                await server.stop()
    return 0


async def _stop_when(stop: asyncio.Event, worker: Any) -> None:
    await stop.wait()
    worker.request_stop()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
