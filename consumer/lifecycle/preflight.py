"""Start-up checks of ``lander run``: everything a worker depends on answers, before it
joins the fleet.

A worker that starts against a stream that does not exist, a lease table it cannot
reach or an archive it cannot write would otherwise join, take shards and stall them.
Each check either passes or raises :class:`PreflightError` (exit 3) with one line that
names the service, the resource and the endpoint, or :class:`UnreachableError` (exit 1)
when an endpoint does not answer within CHECK_SECONDS; no traceback reaches the
operator.

- Kinesis: the stream is listed, and a LATEST iterator of an open shard is read once
  (proves ListShards, GetShardIterator and GetRecords).
- DynamoDB: the lease table exists (created when ``LANDER_LEASE_TABLE_CREATE`` allows;
  ``check_only`` creates nothing and says what start-up would create or change) and
  can be scanned, and its leases are keyed as this worker keys them: by shard id
  for one stream, ``account:stream:epoch:shardId`` for several (LANDER_STREAMS).
- The processor's probe (the lander's: a conditional put of the archive's reserved
  probe object, and a second put that must be refused).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import cause as _cause
from consumer.aws import unreachable as _unreachable
from consumer.errors import RefusedError, UnreachableError
from consumer.leases.model import Lease
from consumer.leases.store import LeaseStore, LeaseStoreError, TableMissingError
from consumer.lifecycle.processor import Probe
from consumer.sequence import Sentinel
from consumer.stream import (
    StartAt,
    StreamClient,
    StreamError,
    StreamNotFoundError,
    TransientStreamError,
)

CHECK_SECONDS = 30.0
"""Each check gives up after this long (botocore's own retries included)."""

T = TypeVar("T")


class PreflightError(RefusedError):
    """A start-up check failed; the message is the one line to print."""


@dataclass(frozen=True, slots=True)
class Target:
    """What the checks talk to, for the messages."""

    stream: str
    kinesis_endpoint: str
    lease_table: str
    dynamodb_endpoint: str
    archive: str | None


@dataclass(frozen=True, slots=True)
class Passed:
    """What the checks found, for one line on success."""

    shards: int
    leases: int
    changes: tuple[str, ...] = ()
    """What start-up would create or change in the lease table (``check_only``)."""


async def preflight(
    target: Target,
    stream: StreamClient | Sequence[StreamClient],
    store: LeaseStore,
    probe: Probe | None,
    *,
    create_table: bool,
    multi: bool = False,
    check_only: bool = False,
) -> Passed:
    """Run every check in order; raise PreflightError at the first failure.

    ``stream`` is the one stream, or (``multi``: LANDER_STREAMS) every stream matched
    at start; ``shards`` then counts theirs together.
    """
    streams = [stream] if not isinstance(stream, Sequence) else list(stream)
    shards = 0
    for one in streams:
        shards += await _check_stream(target, one)
    if check_only:
        if not create_table and not await _table_call(target, store.table_exists()):
            raise _no_table(target)
        changes = await _table_call(target, store.table_changes())
        try:
            found = await _table_call(target, store.list_leases())
        except TableMissingError:
            found = []  # start-up would create it
        leases = _check_keys(target, found, multi=multi)
    else:
        changes, leases = [], await _check_table(target, store, create_table, multi=multi)
    if probe is not None:
        await _check_probe(target, probe)
    return Passed(shards=shards, leases=leases, changes=tuple(changes))


async def _check_stream(target: Target, stream: StreamClient) -> int:
    where = f"Kinesis at {target.kinesis_endpoint}"
    name = getattr(stream, "stream", target.stream)
    try:
        shards = await _bounded(stream.list_shards(), where)
        open_shards = [shard for shard in shards if not shard.closed]
        if open_shards:
            iterator = await _bounded(
                stream.get_iterator(open_shards[0].shard_id, StartAt(Sentinel.LATEST)), where
            )
            await _bounded(stream.get_records(iterator, 1), where)
    except StreamNotFoundError:
        raise PreflightError(
            f"Kinesis stream {name} does not exist ({where}); check LANDER_STREAM, "
            "AWS_REGION and the endpoint"
        ) from None
    except TransientStreamError as exc:
        raise UnreachableError(f"cannot reach {where}: {_cause(exc)}") from None
    except StreamError as exc:
        raise PreflightError(
            f"Kinesis stream {name} is not readable ({where}): {_cause(exc)}"
        ) from None
    except (BotoCoreError, ClientError, OSError) as exc:
        if _unreachable(exc):
            raise UnreachableError(f"cannot reach {where}: {_cause(exc)}") from None
        raise PreflightError(
            f"Kinesis stream {name} is not readable ({where}): {_cause(exc)}"
        ) from None
    return len(shards)


TABLE_ATTEMPTS = 3
"""Times start-up makes the lease table when it is deleted again before it is read."""


def _no_table(target: Target) -> PreflightError:
    return PreflightError(
        f"lease table {target.lease_table} (or its workers table "
        f"{target.lease_table}-workers) does not exist (DynamoDB at "
        f"{target.dynamodb_endpoint}) and LANDER_LEASE_TABLE_CREATE is false: create it, "
        "or allow the worker to"
    )


async def _table_call(target: Target, call: Awaitable[T]) -> T:
    """A lease-table call with the check's errors: unreachable, or not usable."""
    where = f"DynamoDB at {target.dynamodb_endpoint}"
    try:
        return await _bounded(call, where)
    except TableMissingError:
        raise
    except (LeaseStoreError, ClientError, BotoCoreError, OSError) as exc:
        if _unreachable(exc):
            raise UnreachableError(f"cannot reach {where}: {_cause(exc)}") from None
        raise PreflightError(
            f"lease table {target.lease_table} is not usable ({where}): {_cause(exc)}"
        ) from None


async def _check_table(
    target: Target, store: LeaseStore, create_table: bool, *, multi: bool = False
) -> int:
    for _ in range(TABLE_ATTEMPTS):
        try:
            if create_table:
                await _table_call(target, store.ensure_table())
            leases = await _table_call(target, store.list_leases())
            break
        except TableMissingError:
            if not create_table:
                raise _no_table(target) from None
            # Deleted between its making and its reading (an operator, a test): made
            # again, as running workers make it again.
    else:
        raise PreflightError(
            f"lease table {target.lease_table} was deleted each time it was made "
            f"({TABLE_ATTEMPTS} times, DynamoDB at {target.dynamodb_endpoint})"
        )
    if not create_table and not await _table_call(target, store.table_exists()):
        raise _no_table(target)  # the lease table, but not its workers table
    return _check_keys(target, leases, multi=multi)


def _check_keys(target: Target, leases: list[Lease], *, multi: bool) -> int:
    """The leases are keyed as this worker keys them; how many there are."""
    other = next((lease.key for lease in leases if (":" in lease.key) != multi), None)
    if other is not None:
        raise PreflightError(
            f"lease table {target.lease_table} holds "
            + (
                f"single-stream leases (keyed by shard id: {other}); LANDER_STREAMS needs "
                "a table of its own"
                if multi
                else f"multi-stream leases ({other}); read it with LANDER_STREAMS, or give "
                "LANDER_STREAM a table of its own"
            )
        )
    return len(leases)


async def _check_probe(target: Target, probe: Probe) -> None:
    try:
        await _bounded(probe(), f"the archive {target.archive}")
    except (PreflightError, UnreachableError):
        raise
    except RefusedError as exc:  # the probe's own verdict in one line (a KMS key, ...)
        raise PreflightError(str(exc)) from None
    except Exception as exc:
        if target.archive is None:  # a processor of the user's, with a probe of its own
            raise PreflightError(f"the processor's start-up probe failed: {_cause(exc)}") from None
        raise PreflightError(
            f"cannot land in the archive {target.archive}: {_cause(exc)}"
        ) from None


async def _bounded(call: Awaitable[T], where: str) -> T:
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            return await call
    except TimeoutError:
        raise UnreachableError(f"no answer from {where} within {CHECK_SECONDS:.0f} s") from None
