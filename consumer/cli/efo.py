"""The efo read mode at start (`lander run`) and its one command (`lander efo`).

At start, in efo mode, the worker opens a Kinesis client of its own for the
subscriptions (each leased shard holds one connection open, so the pool is sized by
the stream's shards, and its read timeout lies beyond the reader's silence bound),
registers the stream consumer if it is missing and waits until it is ACTIVE. It never
deregisters it: stopping one worker must not cut off the others. ``lander efo
deregister`` does, on request; ``lander efo describe`` shows it.

With ``LANDER_STREAMS`` each stream has its consumer (of the same name, registered
under each stream's ARN) and its subscription client, opened as the stream's lane is
(:mod:`consumer.cli.fleet`); the commands act on every stream the setting matches.
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
from consumer.stream.kinesis import KinesisCatalog
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
    settings: Settings,
    shards: int,
    exits: AsyncExitStack,
    *,
    check_only: bool = False,
    stream: str | None = None,
) -> FanOutReading | None:
    """The efo reading of a starting worker, for ``stream`` (default LANDER_STREAM),
    whose open ``shards`` size the subscription client's pool (None with
    ``check_only``: described only, nothing registered). Raises
    :class:`EfoStartError` with one line to print."""
    stream = stream or settings.stream
    pool = max(50, shards + 16)
    config = client_config(max_pool=pool).merge(AioConfig(read_timeout=SUBSCRIPTION_READ_TIMEOUT))
    client = await exits.enter_async_context(
        aws_session().create_client("kinesis", region_name=region(), config=config)
    )
    fanout = KinesisFanOut(client, stream)
    name = settings.consumer_name
    of = f" of stream {stream}" if settings.streams else ""
    try:
        if check_only:
            found = await fanout.describe_consumer(name)
            status = "not registered (registered at start)" if found is None else found.status
            print(f"lander: efo read mode: stream consumer {name}{of}: {status}")
            return None
        consumer = await ensure_consumer(fanout, name, within=REGISTER_SECONDS)
    except StreamError as exc:
        raise EfoStartError(f"efo read mode: stream consumer {name}{of}: {exc}") from None
    return FanOutReading(fanout, consumer)


async def read_mode_status(
    settings: Settings, clients: Clients, stream: str | None = None
) -> dict[str, str | None]:
    """The read mode as ``lander status`` shows it: in efo mode, the stream consumer of
    ``stream`` (default LANDER_STREAM) described now (its status and ARN; ``-`` if not
    registered)."""
    if settings.read_mode != "efo":
        return {"mode": "polling"}
    name = settings.consumer_name
    try:
        found = await KinesisFanOut(clients.kinesis, stream or settings.stream).describe_consumer(
            name
        )
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
    """Describe or deregister the stream consumer (of every stream LANDER_STREAMS
    matches, one line each)."""
    async with Clients() as clients:
        if not settings.streams:
            return await _efo_one(clients, settings.stream, settings.consumer_name, action, "")
        choice = settings.stream_choice
        assert choice is not None
        try:
            listed = await KinesisCatalog(clients.kinesis).list(choice.may_match)
        except StreamError as exc:
            print(f"lander: cannot list the streams: {exc}", file=sys.stderr)
            return 1
        names = sorted(s.id.name for s in listed if choice.matches(s))
        if not names:
            print(f"lander: no stream matches LANDER_STREAMS ({settings.streams})", file=sys.stderr)
            return 1
        codes = [
            await _efo_one(clients, name, settings.consumer_name, action, f"{name}: ")
            for name in names
        ]
    return max(codes)


async def _efo_one(clients: Clients, stream: str, name: str, action: str, prefix: str) -> int:
    fanout = KinesisFanOut(clients.kinesis, stream)
    try:
        if action == "describe":
            found = await fanout.describe_consumer(name)
            if found is None:
                print(f"{prefix}stream consumer {name}: not registered")
                return 1
            print(f"{prefix}stream consumer {name}: {found.status} {found.arn}")
            return 0
        gone = await fanout.deregister_consumer(name)
    except StreamError as exc:
        print(f"lander: {prefix}stream consumer {name}: {exc}", file=sys.stderr)
        return 1
    print(f"{prefix}stream consumer {name}: " + ("deregistered" if gone else "was not registered"))
    return 0
