"""``lander efo describe|deregister``: the stream consumer of the efo read mode.

Workers register the consumer when they start in efo mode (:mod:`consumer.stream.efo`)
and never deregister it: stopping one worker must not cut off the others. This command
describes it, or deregisters it on request. With ``LANDER_STREAMS`` it acts on the
consumer of every stream the setting matches.
"""

from __future__ import annotations

import argparse
import sys

from consumer.aws import Clients
from consumer.config import FlagSpec, Settings, add_setting_flags
from consumer.errors import EXIT_MISSING
from consumer.lifecycle.assembly import matching_streams
from consumer.stream import FanOutUnsupportedError, StreamError, efo
from consumer.stream.readers import StreamOpening


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
            opening = StreamOpening(settings, settings.stream, clients.kinesis)
            return await _efo_one(opening, action, "")
        try:
            names = await matching_streams(settings, clients)
        except StreamError as exc:
            print(f"lander: cannot list the streams: {exc}", file=sys.stderr)
            return 1
        if not names:
            print(f"lander: no stream matches LANDER_STREAMS ({settings.streams})", file=sys.stderr)
            return 1
        codes = [
            await _efo_one(StreamOpening(settings, name, clients.kinesis), action, f"{name}: ")
            for name in names
        ]
    return max(codes)


async def _efo_one(opening: StreamOpening, action: str, prefix: str) -> int:
    name = opening.settings.consumer_name
    try:
        if action == "describe":
            state = await efo.MODE.describe(opening)
            if state.problem:
                print(f"lander: {prefix}stream consumer {name}: {state.problem}", file=sys.stderr)
                return EXIT_MISSING
            if state.status == "not registered":
                print(f"{prefix}stream consumer {name}: not registered")
                return 1
            if state.arn is None:  # the consumer could not be described
                print(f"lander: {prefix}stream consumer {name}: {state.status}", file=sys.stderr)
                return 1
            print(f"{prefix}stream consumer {name}: {state.status} {state.arn}")
            return 0
        gone = await efo.deregister(opening)
    except FanOutUnsupportedError as exc:
        print(f"lander: {prefix}stream consumer {name}: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except StreamError as exc:
        print(f"lander: {prefix}stream consumer {name}: {exc}", file=sys.stderr)
        return 1
    print(f"{prefix}stream consumer {name}: " + ("deregistered" if gone else "was not registered"))
    return 0
