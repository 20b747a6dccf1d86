"""The efo read mode at start (`lander run`) and its one command (`lander efo`).

At start, in efo mode, the worker opens a Kinesis client of its own for the
subscriptions (each leased shard holds one connection open, so the pool is sized by
the stream's shards, and its read timeout lies beyond the reader's silence bound),
registers the stream consumer if it is missing and waits until it is ACTIVE. It never
deregisters it: stopping one worker must not cut off the others. ``lander efo
deregister`` does, on request; ``lander efo describe`` shows it.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack

from aiobotocore.config import AioConfig

from consumer.aws import Clients, aws_session, client_config, region
from consumer.config import FlagSpec, Settings, add_setting_flags
from consumer.stream import StreamError
from consumer.stream.fanout import FanOutReading, ensure_consumer
from consumer.stream.kinesis_fanout import KinesisFanOut
from consumer.stream.subscriber import SILENCE_SECONDS

SUBSCRIPTION_READ_TIMEOUT = SILENCE_SECONDS + 5
"""The subscription client's socket read timeout: beyond the reader's silence bound,
so a quiet subscription is restarted by the reader, not failed by the socket."""
REGISTER_SECONDS = 120.0
"""How long a starting worker waits for its stream consumer to become ACTIVE."""


class EfoStartError(Exception):
    """The stream consumer could not be registered or did not become ACTIVE."""


async def start_fanout(
    settings: Settings, shards: int, exits: AsyncExitStack, *, check_only: bool = False
) -> FanOutReading | None:
    """The efo reading of a starting worker (None with ``check_only``: described only,
    nothing registered). Raises :class:`EfoStartError` with one line to print."""
    pool = max(50, shards + 16)
    config = client_config(max_pool=pool).merge(AioConfig(read_timeout=SUBSCRIPTION_READ_TIMEOUT))
    client = await exits.enter_async_context(
        aws_session().create_client("kinesis", region_name=region(), config=config)
    )
    fanout = KinesisFanOut(client, settings.stream)
    name = settings.consumer_name
    try:
        if check_only:
            found = await fanout.describe_consumer(name)
            status = "not registered (registered at start)" if found is None else found.status
            print(f"lander: efo read mode: stream consumer {name}: {status}")
            return None
        consumer = await ensure_consumer(fanout, name, within=REGISTER_SECONDS)
    except StreamError as exc:
        raise EfoStartError(f"efo read mode: stream consumer {name}: {exc}") from None
    return FanOutReading(fanout, consumer)


async def read_mode_status(settings: Settings, clients: Clients) -> dict[str, str | None]:
    """The read mode as ``lander status`` shows it: in efo mode, the stream consumer
    described now (its status and ARN; ``-`` if not registered)."""
    if settings.read_mode != "efo":
        return {"mode": "polling"}
    name = settings.consumer_name
    try:
        found = await KinesisFanOut(clients.kinesis, settings.stream).describe_consumer(name)
    except StreamError as exc:
        return {"mode": "efo", "consumer": name, "status": f"unknown: {exc}", "arn": None}
    if found is None:
        return {"mode": "efo", "consumer": name, "status": "not registered", "arn": None}
    return {"mode": "efo", "consumer": name, "status": found.status, "arn": found.arn}


def read_mode_line(mode: dict[str, str | None]) -> str:
    """One line for the status table."""
    if mode["mode"] != "efo":
        return "read mode: polling (GetRecords)"
    return f"read mode: efo, stream consumer {mode['consumer']}: {mode['status']}" + (
        f" {mode['arn']}" if mode.get("arn") else ""
    )


def add_efo_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], flags: tuple[FlagSpec, ...]
) -> None:
    """``lander efo describe|deregister``."""
    efo = commands.add_parser(
        "efo",
        help="describe or deregister the stream consumer of the efo read mode",
        description="The stream consumer workers in efo read mode read through "
        "(LANDER_EFO_CONSUMER, default the lease table's name). Workers register it; "
        "only this command deregisters it. Stop the workers first: a worker whose "
        "consumer is gone logs an error for every shard and reads nothing until it is "
        "registered again (by a restart).",
    )
    efo.add_argument("action", choices=["describe", "deregister"])
    add_setting_flags(efo, Settings, flags)


async def efo_command(settings: Settings, action: str) -> int:
    """Describe or deregister the stream consumer; prints one line."""
    name = settings.consumer_name
    async with Clients() as clients:
        fanout = KinesisFanOut(clients.kinesis, settings.stream)
        try:
            if action == "describe":
                found = await fanout.describe_consumer(name)
                if found is None:
                    print(f"stream consumer {name}: not registered")
                    return 1
                print(f"stream consumer {name}: {found.status} {found.arn}")
                return 0
            gone = await fanout.deregister_consumer(name)
        except StreamError as exc:
            print(f"lander: stream consumer {name}: {exc}", file=sys.stderr)
            return 1
    print(f"stream consumer {name}: " + ("deregistered" if gone else "was not registered"))
    return 0
