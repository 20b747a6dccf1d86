"""The daemon assembled from its settings: what ``lander run`` and ``lander status`` use.

:func:`run_daemon` opens the AWS clients, loads the processor, opens the stream (or
the lanes of ``LANDER_STREAMS``, :mod:`.fleet`), the lease store and each stream's
read mode (:mod:`consumer.stream.modes`), runs the start-up checks
(:mod:`.preflight`), builds the worker and its health server, and runs it until
``stop`` is set. With ``check_only`` it stops after the checks, having started no read
mode and changed nothing, and returns what start-up would do, in lines.

:func:`survey` reads what ``lander status`` shows: the leases, the workers table, each
consumed stream's shards and how its read mode stands.

Failures it can name are raised in one line: :class:`~consumer.config.ConfigError`
(a setting: exit 2), :class:`~consumer.errors.RefusedError` (the environment: exit 3),
:class:`SurveyError` (status cannot read: exit 1). The operator layer (consumer/cli)
maps them to exit codes and imports no store or reader itself (tests/test_layout.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import structlog
from prometheus_client import disable_created_metrics

from consumer.aws import Clients, call_failure, cause, endpoint, unreachable
from consumer.compiled import hot_path_mode
from consumer.config import ConfigError, Settings
from consumer.errors import LanderError, MissingError, RefusedError, UnreachableError
from consumer.landing.protection import ObjectProtection
from consumer.leases.board import Board
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.keys import StreamId, stream_groups
from consumer.leases.model import Lease
from consumer.leases.store import TableMissingError
from consumer.leases.wake import advertised_host, join_address
from consumer.lifecycle.agreement import Agreement, Settled, landing_of
from consumer.lifecycle.fleet import Fleet, open_fleet
from consumer.lifecycle.health import HealthServer
from consumer.lifecycle.preflight import Passed, Target, preflight
from consumer.lifecycle.processor import LoadedProcessor, Probe, WorkerContext, load_processor
from consumer.lifecycle.worker import Worker, tune_gc
from consumer.metrics import LanderMetrics
from consumer.stream import Shard, StreamError, StreamNotFoundError
from consumer.stream.kinesis import KinesisCatalog, KinesisStream
from consumer.stream.modes import read_mode
from consumer.stream.readers import ModeStartError, ModeState, StreamOpening

log = structlog.get_logger("consumer.lifecycle.assembly")


async def run_daemon(
    settings: Settings, stop: asyncio.Event, *, check_only: bool = False
) -> list[str]:
    """Assemble the worker and run it until ``stop`` is set (an empty list), or with
    ``check_only`` only check and return what start-up would do."""
    async with Clients() as clients, AsyncExitStack() as exits:
        context = WorkerContext(settings, clients, LanderMetrics())
        loaded = _load(settings, context)
        fleet = None
        if settings.streams:
            try:
                fleet = await open_fleet(settings, context, exits, check_only=check_only)
            except (RefusedError, StreamError) as exc:
                if unreachable(exc):
                    where = f"Kinesis at {endpoint(clients.kinesis)}"
                    raise UnreachableError(f"cannot reach {where}: {cause(exc)}") from None
                raise RefusedError(f"LANDER_STREAMS: {exc}") from None
        store = DynamoLeaseStore(clients.dynamodb, settings.lease_table)
        stream = None if fleet else KinesisStream(clients.kinesis, settings.stream)
        streams = [lane.client for lane in fleet.lanes] if fleet else []
        probe = (fleet.probe if fleet else None) or loaded.probe
        passed = await preflight(
            Target(
                stream=settings.stream or str(settings.streams),
                kinesis_endpoint=clients.kinesis.meta.endpoint_url,
                lease_table=settings.lease_table,
                dynamodb_endpoint=clients.dynamodb.meta.endpoint_url,
                archive=settings.archive,
            ),
            stream or streams,
            store,
            probe,
            create_table=settings.lease_table_create,
            multi=fleet is not None,
            check_only=check_only,
        )
        names = sorted(lane.name for lane in fleet.lanes) if fleet else [settings.stream]
        agreement = Agreement(store, settings.worker_id, settings.adopt_digests)
        settled = await _settle(settings, clients, agreement, names, fleet, check_only=check_only)
        report = (  # a read mode that cannot start fails the check before it says passed
            await _check_report(settings, clients, names, passed, settled, several=bool(fleet))
            if check_only
            else None
        )
        log.info(
            "start-up checks passed",
            streams=names,
            shards=passed.shards,
            lease_table=settings.lease_table,
            leases=passed.leases,
            archive=settings.archive,
            archive_protection=ObjectProtection.from_settings(settings).describe(),
            processor=settings.processor,
            hot_path=hot_path_mode(),
        )
        if report is not None:
            return report
        worker = await _worker(
            settings,
            context,
            clients,
            exits,
            store=store,
            stream=stream,
            loaded=loaded,
            fleet=fleet,
            probe=probe,
        )
        server = await _health_server(settings, context, worker)
        tune_gc()
        stopper = asyncio.create_task(_stop_when(stop, worker))
        watching = agreement.watch(worker.fitness, settings.landing_check_seconds)
        watcher = asyncio.create_task(watching, name="landing-watch")
        try:
            await worker.run()
        finally:
            stopper.cancel()
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            if server is not None:
                await server.stop()
    return []


async def _settle(
    settings: Settings,
    clients: Clients,
    agreement: Agreement,
    names: list[str],
    fleet: Fleet | None,
    *,
    check_only: bool,
) -> list[Settled]:
    """Each stream's landing held against the fleet's record (:mod:`.agreement`); a
    stream found later is held against it as its lane opens."""
    settled = []
    where = f"DynamoDB at {endpoint(clients.dynamodb)}"
    for name in names:
        landing = landing_of(settings.for_stream(name) if fleet else settings)
        try:
            settled.append(await agreement.settle(name, landing, check_only=check_only))
        except LanderError as exc:
            if isinstance(exc, RefusedError | UnreachableError):
                raise
            what = f"cannot read the landing record of stream {name}"
            raise call_failure(exc, where, what, RefusedError) from None
    if fleet is not None:

        async def admit(name: str) -> None:
            await agreement.settle(name, landing_of(settings.for_stream(name)))

        fleet.admit = admit
    return settled


def _load(settings: Settings, context: WorkerContext) -> LoadedProcessor:
    """The processor LANDER_PROCESSOR names; a ConfigError in one line if it cannot be."""
    try:
        return load_processor(settings.processor, context)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"LANDER_PROCESSOR {settings.processor}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return f"{exc} (modules are found in the current directory and on PYTHONPATH)"
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)


async def _worker(
    settings: Settings,
    context: WorkerContext,
    clients: Clients,
    exits: AsyncExitStack,
    *,
    store: DynamoLeaseStore,
    stream: KinesisStream | None,
    loaded: LoadedProcessor,
    fleet: Fleet | None,
    probe: Probe | None,
) -> Worker:
    """The worker, its single stream's read mode started (a fleet's lanes have theirs)."""
    reader = None
    if fleet is None:
        opening = StreamOpening(settings, settings.stream, clients.kinesis, exits)
        reader = await read_mode(settings.read_mode).start(opening)
    return Worker(
        settings,
        store,
        stream,
        None if fleet else loaded.factory,
        metrics=context.metrics,
        probe=probe,
        reader=reader,
        lanes=fleet.lanes if fleet else (),
        watch=fleet.watch if fleet else None,
    )


async def _health_server(
    settings: Settings, context: WorkerContext, worker: Worker
) -> HealthServer | None:
    """``/metrics``, ``/healthz``, ``/readyz`` and ``/wake`` when LANDER_METRICS_PORT is set,
    and the worker's wake address advertised."""
    if settings.metrics_port is None:
        return None
    # The daemon's own process: a `_created` twin of every counter and histogram series
    # doubled what each scrape stores, for a start time nothing here reads. (Not done on
    # import: an application that embeds the worker keeps its own choice.)
    disable_created_metrics()  # type: ignore[no-untyped-call]
    server = HealthServer(
        context.metrics,
        worker.health,
        settings.metrics_host,
        settings.metrics_port,
        wake=worker.wake,
    )
    try:
        port = await server.start()
    except OSError as exc:
        raise ConfigError(
            f"LANDER_METRICS_PORT {settings.metrics_port} on {settings.metrics_host}: "
            f"{exc.strerror or exc}"
        ) from None
    # A name lookup (auto): off the event loop, as a slow resolver may block.
    host = await asyncio.to_thread(advertised_host, settings.advertise_host, settings.metrics_host)
    worker.advertise(None if host is None else join_address(host, port))
    return server


async def _stop_when(stop: asyncio.Event, worker: Worker) -> None:
    await stop.wait()
    worker.request_stop()


async def _check_report(
    settings: Settings,
    clients: Clients,
    names: list[str],
    passed: Passed,
    settled: list[Settled],
    *,
    several: bool,
) -> list[str]:
    """``lander run --check``'s lines: each stream's read mode and landing, then the
    summary."""
    lines = [one.line for one in settled]
    changes = list(passed.changes) + [one.change for one in settled if one.change]
    for name in names:
        own = settings.for_stream(name) if several else settings
        state = await read_mode(own.read_mode).describe(
            StreamOpening(own, name, clients.kinesis, several=several)
        )
        if state.problem:
            of = f" of stream {name}" if several else ""
            raise ModeStartError(f"{state.mode} read mode{of}: {state.problem}")
        lines.append(f"{name}: {state.line()}" if several else state.line())
        if state.would:
            changes.append(state.would)
    would = "start-up would " + " and ".join(changes) if changes else None
    lines.append(
        f"start-up checks passed: stream{'s' if several else ''} "
        f"{', '.join(names) or '(none yet)'} ({passed.shards} "
        f"shards), lease table {settings.lease_table} ({passed.leases} leases), "
        f"archive {settings.archive or '-'}, processor {settings.processor}; "
        + (would or "start-up changes nothing in the lease table")
    )
    return lines


class SurveyError(LanderError):
    """``lander status`` cannot read the lease table or a stream, though both exist and
    answer (exit 1)."""


@dataclass
class Survey:
    """What ``lander status`` shows, read once."""

    leases: list[Lease]
    board: Board
    shards: dict[StreamId | None, list[Shard]] = field(default_factory=dict)
    """Each consumed stream's shards (None: the one stream of a single-stream table);
    an empty list for a stream that was deleted."""
    modes: dict[str, ModeState] = field(default_factory=dict)
    """Each listed stream's read mode, by name."""


async def survey(settings: Settings) -> Survey:
    """The leases and the workers table, then the shards and read mode of each stream
    the leases name (of LANDER_STREAM only, for a single-stream worker's settings, whose
    stream is looked at first: a missing stream is the first thing to say).

    Raises MissingError (exit 3) for a stream or lease table that does not exist,
    UnreachableError (exit 1) for an endpoint that does not answer, SurveyError (exit
    1) for any other failure to read them."""
    async with Clients() as clients:
        first: dict[StreamId | None, list[Shard]] = {}
        if not settings.streams:
            first[None] = await _shards(clients, settings.stream, missing_is_gone=False)
        store = DynamoLeaseStore(clients.dynamodb, settings.lease_table)
        where = f"DynamoDB at {endpoint(clients.dynamodb)}"
        try:
            leases = await store.list_leases()
            board = await _board_if_any(store)
        except TableMissingError:
            raise MissingError(
                f"lease table {settings.lease_table} does not exist ({where}); a worker "
                "creates it when it starts (lander run)"
            ) from None
        except Exception as exc:
            what = f"cannot read lease table {settings.lease_table}"
            raise call_failure(exc, where, what, SurveyError) from None
        found = Survey(leases, board)
        found.shards.update(first)
        for stream_id in list(stream_groups(leases)) if settings.streams else []:
            name = settings.stream if stream_id is None else stream_id.name
            found.shards[stream_id] = await _shards(
                clients, name, missing_is_gone=stream_id is not None
            )
        for stream_id, shards in found.shards.items():
            if (stream_id is None) == bool(settings.streams) or not shards:
                continue  # a stream that was deleted has no read mode to show
            name = settings.stream if stream_id is None else stream_id.name
            own = settings.for_stream(name) if settings.streams else settings
            opening = StreamOpening(own, name, clients.kinesis, several=bool(settings.streams))
            found.modes[name] = await read_mode(own.read_mode).describe(opening)
    return found


async def _shards(clients: Clients, name: str, *, missing_is_gone: bool) -> list[Shard]:
    """A stream's shards for status; a deleted stream of LANDER_STREAMS has none (its
    leases are shown as gone), LANDER_STREAM missing is MissingError."""
    where = f"Kinesis at {endpoint(clients.kinesis)}"
    try:
        return await KinesisStream(clients.kinesis, name).list_shards()
    except StreamNotFoundError:
        if missing_is_gone:
            return []
        raise MissingError(
            f"Kinesis stream {name} does not exist ({where}); check LANDER_STREAM, "
            "AWS_REGION and the endpoint"
        ) from None
    except StreamError as exc:
        raise call_failure(exc, where, f"cannot list the shards of {name}", SurveyError) from None


async def _board_if_any(store: DynamoLeaseStore) -> Board:
    """The workers table, or an empty board before any lander worker made it (a table
    a KCL application left)."""
    with contextlib.suppress(TableMissingError):
        return await store.read_board()
    return Board()


async def matching_streams(settings: Settings, clients: Clients) -> list[str]:
    """The names of the streams LANDER_STREAMS matches now (``lander efo``); raises
    StreamError."""
    choice = settings.stream_choice
    assert choice is not None
    listed = await KinesisCatalog(clients.kinesis).list(choice.may_match)
    return sorted(s.id.name for s in listed if choice.matches(s))


async def lease_table_view(
    clients: Clients, table: str, stream: str
) -> tuple[list[Lease], list[Shard]]:
    """One stream's leases and shards, read with the caller's clients (the demo's
    closing status)."""
    leases = await DynamoLeaseStore(clients.dynamodb, table).list_leases()
    return leases, await KinesisStream(clients.kinesis, stream).list_shards()
