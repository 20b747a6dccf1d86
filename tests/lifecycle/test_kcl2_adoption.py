"""A KCL 2.x lease table adopted as is, over HTTP, on two DynamoDB emulators.

KCL 2.x makes its table keyed by ``leaseKey`` alone, with no index, provisioned or
on-demand. A lander worker started on it (its KCL workers stopped) adds KCL 3.x's owner
index where it can, and resumes every shard exactly after its KCL checkpoint. Where the
index cannot be added (dynalite refuses one on an on-demand table, ../shared/
EMULATORS.md; on AWS, a role without UpdateTable) the worker says so in one line and
finds its leases by Scan: it never stops on it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import structlog

from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    ProcessRecordsInput,
)
from consumer.lifecycle.worker import Worker
from consumer.stream.memory import MAX_HASH, MemoryStream
from tests.support.dynalite import dynalite_client, running_dynalite

if TYPE_CHECKING:
    from consumer.aws import Clients

pytestmark = pytest.mark.emulator

INDEX = "LeaseOwnerToLeaseKeyIndex"


@pytest.fixture(scope="module")
def dynalite_endpoint() -> Iterator[str]:
    with running_dynalite() as endpoint:
        yield endpoint


class Recording:
    """Notes every record's sequence number by shard."""

    def __init__(self, seen: dict[str, list[int]]) -> None:
        self.seen = seen

    async def initialize(self, init: InitializationInput) -> None:
        self.seen.setdefault(init.shard_id, [])

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        for record in batch.records:
            self.seen[record.shard_id].append(record.position.sequence)

    async def lease_lost(self) -> None:
        pass

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        await checkpointer.checkpoint()

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        pass


async def _kcl2_table(client: Any, name: str, billing: str) -> None:
    """The table as KCL 2.x's DynamoDBLeaseRefresher creates it."""
    kwargs: dict[str, Any] = {"BillingMode": billing}
    if billing == "PROVISIONED":
        kwargs["ProvisionedThroughput"] = {"ReadCapacityUnits": 10, "WriteCapacityUnits": 10}
    await client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        **kwargs,
    )


def _lease(shard: str, checkpoint: str, owner: str) -> dict[str, Any]:
    """A lease as KCL 2.x's DynamoDBLeaseSerializer writes it."""
    return {
        "leaseKey": {"S": shard},
        "leaseOwner": {"S": owner},
        "leaseCounter": {"N": "42"},
        "checkpoint": {"S": checkpoint},
        "checkpointSubSequenceNumber": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
    }


@pytest.mark.parametrize(
    ("emulator", "billing", "index"),
    [
        ("moto", "PROVISIONED", "built"),
        ("moto", "PAY_PER_REQUEST", "built"),
        # dynalite accepts the index with throughput and never builds it, as an index
        # still backfilling on AWS: the Query is refused, owners are found by Scan.
        ("dynalite", "PROVISIONED", "never built"),
        ("dynalite", "PAY_PER_REQUEST", "refused"),
    ],
)
async def test_a_kcl_2_table_is_adopted(
    aws_clients: Clients, dynalite_endpoint: str, emulator: str, billing: str, index: str
) -> None:
    if emulator == "moto":
        await _adopt(aws_clients.dynamodb, billing, index)
    else:
        async with dynalite_client(dynalite_endpoint) as client:
            await _adopt(client, billing, index)


async def _adopt(client: Any, billing: str, index: str) -> None:
    name = f"kcl2-{uuid.uuid4().hex[:12]}"
    await _kcl2_table(client, name, billing)
    stream = MemoryStream(2)
    sequences = {
        shard: [stream.put(b"{}", "k", explicit_hash_key=hashed)[1] for _ in range(5)]
        for shard, hashed in (("shardId-000000000000", 0), ("shardId-000000000001", MAX_HASH))
    }
    checkpoints = {
        "shardId-000000000000": str(sequences["shardId-000000000000"][2]),
        "shardId-000000000001": "TRIM_HORIZON",
    }
    for n, (shard, checkpoint) in enumerate(sorted(checkpoints.items())):
        await client.put_item(TableName=name, Item=_lease(shard, checkpoint, f"kcl-worker-{n}"))

    settings = load_settings(
        stream="s",
        lease_table=name,
        worker_id="w1",
        failover_seconds=2.0,
        lease_sweep_seconds=0.5,
        shard_sync_seconds=0.5,
        poll_idle_seconds=0.2,
        shutdown_seconds=3.0,
    )
    seen: dict[str, list[int]] = {}
    worker = Worker(settings, DynamoLeaseStore(client, name), stream, lambda: Recording(seen))
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(worker.run())
        async with asyncio.timeout(30):
            while sum(len(v) for v in seen.values()) < 7:
                assert not task.done(), task
                await asyncio.sleep(0.05)
        worker.request_stop()
        await asyncio.wait_for(task, 15)

    # Exactly after each checkpoint: the two records after the third, all five of the
    # other shard, each once.
    assert seen == {
        "shardId-000000000000": sequences["shardId-000000000000"][3:],
        "shardId-000000000001": sequences["shardId-000000000001"],
    }
    described = (await client.describe_table(TableName=name))["Table"]
    indexes = [i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])]
    refusals = [e for e in logs if e["event"].startswith("could not add the lease owner index")]
    assert indexes == ([INDEX] if index == "built" else [])
    if index != "refused":
        assert refusals == [], refusals
    else:
        (refusal,) = refusals
        assert refusal["error"] == "ValidationException"
        assert "provisionedThroughput" in refusal["reason"]
    await client.delete_table(TableName=name)
