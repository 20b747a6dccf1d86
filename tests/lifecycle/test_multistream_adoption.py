"""A KCL multi-stream lease table adopted as is, over HTTP on the DynamoDB emulator.

KCL 2.3+ in multi-stream mode keys each lease ``account:stream:creationEpoch:shardId``,
stores the stream identifier in ``streamName`` and the shard in ``shardId``, and names
parents by shard id. A lander worker of the same streams (LANDER_STREAMS) takes those
leases at their KCL checkpoints, holds a child back until its parent's lease is
finished, reads a finished parent's child, and leaves another stream's leases alone.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from consumer.aws import Clients
from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.keys import StreamId
from consumer.lifecycle.lanes import Lane
from consumer.lifecycle.worker import Worker
from consumer.stream.memory import MemoryStream
from tests.support.idle import idle

pytestmark = pytest.mark.emulator

STARTS: dict[str, str] = {}
"""Where each shard started, as the processor was told."""


def _item(stream: StreamId, shard: str, checkpoint: str, **extra: Any) -> dict[str, Any]:
    """A lease as KCL's MultiStreamLease serializer writes it."""
    return {
        "leaseKey": {"S": f"{stream.serialized}:{shard}"},
        "streamName": {"S": stream.serialized},
        "shardId": {"S": shard},
        "leaseOwner": {"S": "kcl-worker-0"},
        "leaseCounter": {"N": "11"},
        "checkpoint": {"S": checkpoint},
        "checkpointSubSequenceNumber": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
        **extra,
    }


async def test_a_kcl_multi_stream_table_is_adopted(aws_clients: Clients) -> None:
    client = aws_clients.dynamodb
    name = f"kcl-multi-{uuid.uuid4().hex[:12]}"
    await client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    orders = StreamId("123456789012", "orders", 1_700_000_000)
    clicks = StreamId("123456789012", "clicks", 1_700_000_100)
    other = StreamId("123456789012", "not-ours", 1_700_000_200)
    # orders: shard 0 was split into 1 and 2, and KCL read shard 0 to its end.
    orders_stream = MemoryStream(1)
    left, right = orders_stream.split("shardId-000000000000", 2**127)
    clicks_stream = MemoryStream(1)
    for _ in range(3):
        clicks_stream.put(b'{"x": 1}', "k")
    middle = clicks_stream.shard("shardId-000000000000").records[1].sequence  # type: ignore[union-attr]
    parent = {"parentShardId": {"SS": ["shardId-000000000000"]}}
    items = [
        _item(orders, "shardId-000000000000", "SHARD_END"),
        _item(orders, left, "TRIM_HORIZON", **parent),
        _item(orders, right, "TRIM_HORIZON", **parent),
        _item(clicks, "shardId-000000000000", str(middle)),
        _item(other, "shardId-000000000000", "LATEST"),
    ]
    for item in items:
        await client.put_item(TableName=name, Item=item)

    settings = load_settings(
        streams="orders,clicks",
        lease_table=name,
        worker_id="w1",
        failover_seconds=2.0,
        lease_sweep_seconds=0.5,
        shard_sync_seconds=0.5,
        poll_idle_seconds=0.2,
        shutdown_seconds=3.0,
    )
    store = DynamoLeaseStore(client, name)
    lanes = [
        Lane(orders, "orders", orders_stream, idle(STARTS)),
        Lane(clicks, "clicks", clicks_stream, idle(STARTS)),
    ]
    worker = Worker(settings, store, None, None, lanes=lanes)
    task = asyncio.create_task(worker.run())
    STARTS.clear()
    async with asyncio.timeout(30):
        while len(STARTS) < 3:
            assert not task.done(), task
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # time enough to (wrongly) take the other stream's lease
    assert sorted(worker.coordinator.held) == sorted(
        [
            f"{orders.serialized}:{left}",
            f"{orders.serialized}:{right}",
            f"{clicks.serialized}:shardId-000000000000",
        ]
    )
    # The processors see shard ids; clicks resumes at KCL's checkpoint.
    assert {
        left: "TRIM_HORIZON",
        right: "TRIM_HORIZON",
        "shardId-000000000000": f"{middle}:0",
    } == STARTS
    worker.request_stop()
    await asyncio.wait_for(task, 15)

    scanned = (await client.scan(TableName=name, ConsistentRead=True))["Items"]
    by_key = {i["leaseKey"]["S"]: i for i in scanned}
    untouched = by_key[f"{other.serialized}:shardId-000000000000"]
    assert untouched == items[-1]
    for key in (f"{orders.serialized}:{left}", f"{orders.serialized}:{right}"):
        assert by_key[key]["parentShardId"] == {"SS": ["shardId-000000000000"]}
        assert by_key[key]["streamName"] == {"S": orders.serialized}
    await client.delete_table(TableName=name)
