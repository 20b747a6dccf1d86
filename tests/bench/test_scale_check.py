"""The counting proxy's labels name each DynamoDB request as the billed in-memory store
names the same call, so the emulator counts and the simulated ones line up."""

from __future__ import annotations

from bench.scale_check import label
from bench.units import dynamo_item_bytes


def _slot(expression: str) -> dict[str, object]:
    return {
        "TableName": "t-workers",
        "Key": {"itemKey": {"S": "worker/w1"}},
        "UpdateExpression": expression,
    }


def _lease(key: str, expression: str) -> dict[str, object]:
    return {"Key": {"leaseKey": {"S": key}}, "UpdateExpression": expression}


def test_workers_table_calls_are_labelled_as_the_simulation_bills_them() -> None:
    beat = "SET c = :next, n = :held, l = :leaving, u = :cpu, t = :now"
    assert label("UpdateItem", _slot(beat), False) == "UpdateItem slot beat"
    assert label("UpdateItem", _slot("SET f = :true"), True) == (
        "UpdateItem slot fence (condition failed)"
    )
    deliver = "SET i = list_append(i, :keys)"
    assert label("UpdateItem", _slot(deliver), False) == "UpdateItem slot deliver"
    assert label("UpdateItem", _slot("SET g = g + :one"), False) == "UpdateItem slot notice"
    leader = {"TableName": "t-workers", "Key": {"itemKey": {"S": "leader"}}}
    assert label("GetItem", leader, False) == "GetItem leader (eventual)"
    renew = {
        "TableName": "t-workers",
        "Item": {"itemKey": {"S": "leader"}},
        "ConditionExpression": "w = :me AND c = :counter",
    }
    assert label("PutItem", renew, False) == "PutItem leader renew"
    claim = {**renew, "ConditionExpression": "attribute_not_exists(c)"}
    assert label("PutItem", claim, True) == "PutItem leader claim (condition failed)"
    assert label("Scan", {"TableName": "t-workers"}, False) == "Scan workers (eventual)"
    assert label("Scan", {"TableName": "t", "ConsistentRead": False}, False) == "Scan (eventual)"
    assert label("Scan", {"TableName": "t", "ConsistentRead": True}, False) == "Scan (strong)"
    assert label("Query", {"TableName": "t"}, False) == "Query owner index"


def test_lease_writes_are_told_apart() -> None:
    renew = "SET lastUpdateMs = :now, leaseCounter = :next"
    assert label("UpdateItem", _lease("shardId-1", renew), False) == "UpdateItem renew"
    claim = label("UpdateItem", _lease("lander-worker:w1", renew), False)
    assert claim == "UpdateItem renew (worker id)"
    take = "SET lastUpdateMs = :now, leaseOwner = :me, leaseCounter = :next REMOVE handoffTo"
    assert label("UpdateItem", _lease("shardId-1", take), False) == "UpdateItem take"
    checkpoint = "SET lastUpdateMs = :now, leaseCounter = :next, checkpoint = :cp"
    assert label("UpdateItem", _lease("s", checkpoint), False) == "UpdateItem checkpoint"
    ask = "SET handoffTo = :to REMOVE handoffAck"
    assert label("UpdateItem", _lease("s", ask), False) == "UpdateItem hand-off request"
    ack = "SET handoffAck = :to"
    assert label("UpdateItem", _lease("s", ack), False) == "UpdateItem hand-off ack"


def test_an_items_size_counts_names_and_values_as_dynamodb_does() -> None:
    slot = {
        "itemKey": {"S": "worker/w1"},  # 7 + 9
        "c": {"N": "12"},  # 1 + 2
        "l": {"BOOL": True},  # 1 + 1
        "i": {"L": [{"S": "s-1"}]},  # 1 + 3 + (3 + 1)
    }
    assert dynamo_item_bytes(slot) == 16 + 3 + 2 + 8
