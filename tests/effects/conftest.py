"""One lease held by a worker, and an effects store fenced by it, on the in-memory fake
and on DynamoDB (the embedded emulator, over HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from consumer.aws import Clients
from consumer.effects.dynamo import DynamoEffectStore
from consumer.effects.memory import MemoryEffectStore
from consumer.effects.store import EffectStore
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.dynamo_table import WORKERS_SUFFIX
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease, LeaseLostError
from consumer.leases.store import LeaseStore
from consumer.sequence import Position, Sentinel

T = TypeVar("T")
SHARD = "shardId-000000000000"


@dataclass
class Held:
    """A lease as one worker holds it: the fence its effect writes carry, kept up to
    date by its own writes, as the worker's coordinator does."""

    leases: LeaseStore
    lease: Lease
    lost: bool = False
    checkpoints: list[Position | None] = field(default_factory=list)

    async def fenced(self, write: Callable[[Lease], Awaitable[T]]) -> T:
        if self.lost:
            raise LeaseLostError(self.lease.key, "lost earlier")
        try:
            return await write(self.lease)
        except LeaseLostError:
            self.lost = True
            raise

    @property
    def key(self) -> str:
        return self.lease.key

    async def checkpoint(self, position: Position | None = None) -> None:
        """A checkpoint, fenced as the worker's (it moves the lease's counter)."""
        if self.lost:
            raise LeaseLostError(self.lease.key, "lost earlier")
        at = Sentinel.TRIM_HORIZON if position is None else position
        self.lease = await self.leases.checkpoint(self.lease, at)
        self.checkpoints.append(position)

    async def ensure_lease(self) -> None:
        if self.lost:
            raise LeaseLostError(self.lease.key, "lost earlier")


@dataclass
class Bench:
    """A lease table with one lease, and the effects store fenced by it."""

    leases: LeaseStore
    effects: EffectStore

    async def hold(self, worker: str) -> Held:
        """Take the shard's lease for ``worker`` (from whoever held it)."""
        lease = await self.leases.get_lease(SHARD)
        assert lease is not None
        return Held(self.leases, await self.leases.take(lease, worker))


@pytest.fixture(params=["memory", pytest.param("dynamo", marks=pytest.mark.emulator)])
def clients(request: pytest.FixtureRequest) -> Clients | None:
    """None for the in-memory fake; the emulator's clients for DynamoDB (requested only
    then, so the memory variant boots no emulator)."""
    if request.param == "memory":
        return None
    aws: Clients = request.getfixturevalue("aws_clients")
    return aws


@pytest.fixture
async def bench(clients: Clients | None) -> AsyncIterator[Bench]:
    """A fresh lease table (one unowned lease) and effects table on each backend."""
    if clients is None:
        memory = MemoryLeaseStore()
        await memory.ensure_table()
        await memory.create_lease(SHARD, frozenset(), Sentinel.TRIM_HORIZON)
        yield Bench(memory, MemoryEffectStore(memory))
        return
    name = f"fx-{uuid.uuid4().hex[:12]}"
    leases = DynamoLeaseStore(clients.dynamodb, name)
    await leases.ensure_table()
    await leases.create_lease(SHARD, frozenset(), Sentinel.TRIM_HORIZON)
    yield Bench(leases, DynamoEffectStore(clients.dynamodb, f"{name}-effects", name))
    for table in (name, name + WORKERS_SUFFIX, f"{name}-effects"):
        await _drop(clients.dynamodb, table)


async def _drop(client: Any, table: str) -> None:
    try:
        await client.delete_table(TableName=table)
    except Exception:  # a table a test never made
        return
