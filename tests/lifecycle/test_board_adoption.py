"""A KCL 3.x lease table adopted as is by board coordination, over HTTP on the emulator.

KCL 3.x creates the table with its owner index (``LeaseOwnerToLeaseKeyIndex``) and,
from 3.5, keeps its leader lock, migration state and worker metrics beside the leases.
A board worker started on such a table (its KCL workers stopped) waits out the
failover time once to see that no lease is renewed, uses the existing index, leaves
KCL's other items alone, and takes the leases at their KCL checkpoints.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from consumer.aws import Clients
from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.lifecycle.worker import Worker
from consumer.stream.memory import MemoryStream
from tests.support.idle import idle

pytestmark = pytest.mark.emulator


STARTS: dict[str, str] = {}
"""Where each shard started, as the processor was told."""


async def test_a_kcl_3_table_is_adopted_by_board_coordination(aws_clients: Clients) -> None:
    client = aws_clients.dynamodb
    name = f"kcl3-board-{uuid.uuid4().hex[:12]}"
    await client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "leaseKey", "AttributeType": "S"},
            {"AttributeName": "leaseOwner", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "LeaseOwnerToLeaseKeyIndex",
                "KeySchema": [
                    {"AttributeName": "leaseOwner", "KeyType": "HASH"},
                    {"AttributeName": "leaseKey", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    stream = MemoryStream(2)
    items = [
        {
            "leaseKey": {"S": f"shardId-00000000000{n}"},
            "leaseOwner": {"S": f"kcl-worker-{n}"},
            "checkpointOwner": {"S": f"kcl-worker-{n}"},
            "leaseCounter": {"N": str(7 + n)},
            "checkpoint": {"S": "TRIM_HORIZON"},
            "checkpointSubSequenceNumber": {"N": "0"},
            "ownerSwitchesSinceCheckpoint": {"N": "0"},
            "throughputKBps": {"N": "12.5"},
            "entityType": {"S": "LEASE"},
        }
        for n in range(2)
    ]
    others = [
        {
            "leaseKey": {"S": "Leader"},
            "ownerName": {"S": "kcl-worker-0"},
            "entityType": {"S": "LEADER"},
        },
        {
            "leaseKey": {"S": "kcl-worker-0"},
            "lut": {"N": "1790000000"},
            "entityType": {"S": "WORKER_METRIC_STATS"},
        },
    ]
    for item in [*items, *others]:
        await client.put_item(TableName=name, Item=item)

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
    store = DynamoLeaseStore(client, name)
    worker = Worker(settings, store, stream, idle(STARTS))
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(30):
        # Holding a lease comes before its shard's processor is initialised (a task of
        # its own): wait for both, or the check below races the second initialize.
        while len(worker.coordinator.held) < 2 or len(STARTS) < 2:
            assert not task.done(), task
            await asyncio.sleep(0.05)
    assert STARTS == {
        "shardId-000000000000": "TRIM_HORIZON",
        "shardId-000000000001": "TRIM_HORIZON",
    }
    worker.request_stop()
    await asyncio.wait_for(task, 15)

    described = (await client.describe_table(TableName=name))["Table"]
    assert [i["IndexName"] for i in described["GlobalSecondaryIndexes"]] == [
        "LeaseOwnerToLeaseKeyIndex"
    ]
    for other in others:
        kept = await client.get_item(TableName=name, Key={"leaseKey": other["leaseKey"]})
        assert kept["Item"] == other
    lease = (await client.get_item(TableName=name, Key={"leaseKey": items[1]["leaseKey"]}))["Item"]
    assert "checkpointOwner" not in lease  # a KCL 3.x hand-off left half-done is void
    assert "leaseOwner" not in lease  # released at the stop, for KCL or the lander to take
    await client.delete_table(TableName=name)
