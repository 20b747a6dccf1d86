"""The lease-table fixtures every store contract test shares: one table per test, on
the in-memory fake and on DynamoDB (the embedded emulator, over HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from consumer.aws import Clients
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.dynamo_table import WORKERS_SUFFIX
from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.store import CoordinatedStore


@dataclass
class Table:
    """A store under test and a way to delete its whole table."""

    store: CoordinatedStore
    drop: Callable[[], Awaitable[None]]


@pytest.fixture(params=["memory", pytest.param("dynamo", marks=pytest.mark.emulator)])
def clients(request: pytest.FixtureRequest) -> Clients | None:
    """None for the in-memory fake; the emulator's clients for DynamoDB, requested only
    then, so that the memory variant boots no emulator (and runs in `make test-fast`)."""
    if request.param == "memory":
        return None
    aws: Clients = request.getfixturevalue("aws_clients")
    return aws


@pytest.fixture
async def table(clients: Clients | None) -> AsyncIterator[Table]:
    """An empty, existing lease table on each backend."""
    if clients is None:
        memory = MemoryLeaseStore()

        async def drop_memory() -> None:
            memory.drop_table()

        await memory.ensure_table()
        yield Table(memory, drop_memory)
        return
    client = clients.dynamodb
    name = f"leases-{uuid.uuid4().hex[:12]}"
    dynamo = DynamoLeaseStore(client, name)

    async def drop_dynamo() -> None:
        await client.delete_table(TableName=name)
        await client.delete_table(TableName=name + WORKERS_SUFFIX)

    await dynamo.ensure_table()
    yield Table(dynamo, drop_dynamo)
