"""``lander run`` over several streams (``LANDER_STREAMS``): the lanes a worker starts
with and the watch that keeps them in step with the account's streams.

Each stream's processors are loaded with the stream's own settings (its name in
every landed line and key, and what LANDER_STREAMS_FILE sets for it); the worker's
probe runs each archive's probe in turn. Names and ARNs given
explicitly must exist at start (one line names those that do not); a pattern may
match nothing yet. A stream found by a later listing is read from TRIM_HORIZON
whatever LANDER_INITIAL_POSITION says: it appeared while the fleet ran, so none of its
records was meant to be skipped.

Each lane's read mode is started as the lane is opened (:mod:`consumer.stream.modes`;
in the efo mode, the stream's consumer registered or found ACTIVE, and a subscription
client of its own). At start a mode that cannot be started refuses the start in one
line; for a stream found later the lane is not opened, the error is logged, and the
next listing tries again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import structlog

from consumer.aws import Clients
from consumer.config import Settings
from consumer.errors import RefusedError
from consumer.leases.keys import StreamId
from consumer.lifecycle.lanes import Lane, StreamWatch
from consumer.lifecycle.processor import Probe, WorkerContext, load_processor
from consumer.sequence import Sentinel
from consumer.stream.kinesis import KinesisCatalog, KinesisStream
from consumer.stream.modes import read_mode
from consumer.stream.readers import StreamOpening
from consumer.stream.streams import Listed

log = structlog.get_logger("consumer.lifecycle.fleet")


class StreamsMissingError(RefusedError):
    """Streams named in LANDER_STREAMS do not exist."""


@dataclass
class Fleet:
    """What a multi-stream worker starts with."""

    lanes: list[Lane]
    watch: StreamWatch
    probe: Probe | None
    """Every archive's probe in turn (the streams may land in different archives)."""
    admit: Callable[[str], Awaitable[None]] | None = None
    """Held against a stream found later before its lane opens: its landing agrees with
    the fleet's record (:mod:`.agreement`), or the lane is not opened."""


async def open_fleet(
    settings: Settings,
    context: WorkerContext,
    exits: AsyncExitStack,
    *,
    check_only: bool = False,
) -> Fleet:
    """List the streams LANDER_STREAMS names and open a lane for each (with
    ``check_only`` the read modes are not started: each lane reads by polling, and
    nothing is registered). Raises a RefusedError (StreamsMissingError, ModeStartError)
    or a StreamError with one line."""
    choice = settings.stream_choice
    assert choice is not None
    clients: Clients = context.clients
    catalog = KinesisCatalog(clients.kinesis)

    async def lister() -> list[Listed]:
        return [s for s in await catalog.list(choice.may_match) if choice.matches(s)]

    probes: dict[str, Probe] = {}

    async def make_lane(stream: StreamId, *, later: bool = False) -> Lane:
        own = settings.for_stream(stream.name)
        loaded = load_processor(own.processor, WorkerContext(own, clients, context.metrics))
        if loaded.probe is not None:
            probes.setdefault(str(own.archive), loaded.probe)
        initial, timestamp = own.start_position
        if later:  # created while the fleet ran: every record of it is new
            initial, timestamp = Sentinel.TRIM_HORIZON, None
            if fleet.admit is not None:
                await fleet.admit(stream.name)
        client = KinesisStream(clients.kinesis, stream.name)
        lane = Lane(stream, stream.name, client, loaded.factory, initial, timestamp)
        if not check_only:
            opening = StreamOpening(own, stream.name, clients.kinesis, exits, several=True)
            lane.reader = await read_mode(own.read_mode).start(opening)
        return lane

    listed = await lister()
    absent = choice.absent(listed)
    if absent:
        raise StreamsMissingError(
            f"LANDER_STREAMS names streams that do not exist (or are not active): "
            f"{', '.join(absent)} (Kinesis at {clients.kinesis.meta.endpoint_url})"
        )
    if not listed:
        log.warning("no stream matches LANDER_STREAMS yet", streams=settings.streams)
    lanes = [await make_lane(stream.id) for stream in sorted(listed, key=lambda s: s.id)]

    async def make_later(stream: StreamId) -> Lane:
        return await make_lane(stream, later=True)

    watch = StreamWatch(choice, lister, make_later, interval=settings.streams_sync_seconds)

    async def probe() -> None:
        for one in list(probes.values()):
            await one()

    fleet = Fleet(lanes, watch, probe if probes else None)
    return fleet
