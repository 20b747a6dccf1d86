"""The effects benchmark's pure parts: DynamoDB's units, the bill its hooks keep on a
client (a stubbed botocore client, no emulator), its summary and its rows in the docs."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from bench.docs import summary_table
from bench.effects import EffectsConfig, Run, render, summarise
from bench.effects_bill import DynamoBill, Line
from bench.units import read_units, write_units

LEASES, EFFECTS = "t-leases", "t-leases-effects"


def test_units_follow_dynamodbs_rules() -> None:
    assert read_units(0) == 1.0  # an item that is not there still costs a unit
    assert read_units(4096) == 1.0
    assert read_units(4097) == 2.0
    assert read_units(100, strong=False) == 0.5
    assert read_units(100, transactional=True) == 2.0
    assert write_units(0) == 1.0
    assert write_units(1024) == 1.0
    assert write_units(1025) == 2.0
    assert write_units(300, transactional=True) == 2.0
    assert write_units(1500, transactional=True) == 4.0


def _client() -> Any:
    return boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the stubber answers
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def _effect(state: str, pad: str = "") -> dict[str, Any]:
    return {"effectKey": {"S": "k1"}, "effectState": {"S": state}, "result": {"S": pad}}


def _transaction(state: str, pad: str = "") -> dict[str, Any]:
    check = {
        "TableName": LEASES,
        "Key": {"leaseKey": {"S": "shardId-0"}},
        "ConditionExpression": "leaseOwner = :o",
        "ExpressionAttributeValues": {":o": {"S": "w1"}},
    }
    return {
        "TransactItems": [
            {"ConditionCheck": check},
            {"Put": {"TableName": EFFECTS, "Item": _effect(state, pad)}},
        ]
    }


def test_the_bill_counts_calls_and_transaction_items_and_prices_them() -> None:
    client = _client()
    bill = DynamoBill({LEASES: "lease", EFFECTS: "effects"})
    bill.attach(client)
    get = {"TableName": EFFECTS, "Key": {"effectKey": {"S": "k1"}}, "ConsistentRead": True}
    checkpoint = {
        "TableName": LEASES,
        "Key": {"leaseKey": {"S": "shardId-0"}},
        "UpdateExpression": "SET checkpoint = :cp",
        "ExpressionAttributeValues": {":cp": {"S": "1"}},
    }
    with Stubber(client) as stub:
        stub.add_response("create_table", {}, None)
        stub.add_response("get_item", {}, get)
        stub.add_response("transact_write_items", {}, _transaction("IN_PROGRESS"))
        stub.add_response("transact_write_items", {}, _transaction("COMPLETED", "x" * 1100))
        stub.add_response("get_item", {"Item": _effect("COMPLETED", "x" * 5000)}, get)
        stub.add_response("update_item", {}, checkpoint)
        client.create_table(
            TableName=EFFECTS,
            KeySchema=[{"AttributeName": "effectKey", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "effectKey", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        bill.phase = "records"
        client.get_item(**get)
        client.transact_write_items(**_transaction("IN_PROGRESS"))
        client.transact_write_items(**_transaction("COMPLETED", "x" * 1100))
        client.get_item(**get)
        client.update_item(**checkpoint)
    bill.settle({LEASES: 300, EFFECTS: 6000})
    assert bill.phase_lines("startup")["effects CreateTable"].kind == "one-off"
    lines = bill.phase_lines("records")
    assert {label: line.count for label, line in lines.items()} == {
        "effects GetItem (strong)": 2,
        "TransactWriteItems": 2,
        "TransactWriteItems item: ConditionCheck on lease": 2,
        "TransactWriteItems item: Put on effects": 2,
        "lease UpdateItem (checkpoint)": 1,
    }
    # Read units by what came back: nothing (1), then a 5 KB item (2).
    assert lines["effects GetItem (strong)"].read_units == 3.0
    # Each condition check: 2 units per KB of the lease item (300 B).
    assert lines["TransactWriteItems item: ConditionCheck on lease"].write_units == 4.0
    # The claim is under a KB (2), the completion over (4): the larger of before and after.
    assert lines["TransactWriteItems item: Put on effects"].write_units == 2.0 + 4.0
    assert lines["lease UpdateItem (checkpoint)"].write_units == 1.0
    assert all(line.kind == "record" for line in lines.values())


def _run(side: str, round_: int, seconds: float, lines: dict[str, Line]) -> Run:
    return Run(
        side=side,
        round=round_,
        records=100,
        seconds=seconds,
        first_record_seconds=1.0,
        busy_seconds=seconds - 1.0,
        effect_calls=0 if side == "redelivery" else 100,
        outcomes={} if side == "baseline" else {"done": 100},
        lines=lines,
        largest_items={EFFECTS: 200, LEASES: 250},
    )


def _lines(gets: int, transactions: int) -> dict[str, Line]:
    lines = {"lease UpdateItem (checkpoint)": Line("record", 1, 0.0, 1.0, 0.02)}
    if gets:
        lines["effects GetItem (strong)"] = Line("record", gets, float(gets), 0.0, 0.5)
    if transactions:
        lines["TransactWriteItems"] = Line("record", transactions, 0.0, 0.0, 1.0)
        lines["TransactWriteItems item: Put on effects"] = Line(
            "record", transactions, 0.0, 2.0 * transactions
        )
        lines["TransactWriteItems item: ConditionCheck on lease"] = Line(
            "record", transactions, 0.0, 2.0 * transactions
        )
    lines["workers UpdateItem"] = Line("coordination", 3, 0.0, 3.0, 0.1)
    return lines


def _result() -> dict[str, Any]:
    runs = [
        _run("baseline", 1, 1.1, _lines(0, 0)),
        _run("effects", 1, 11.0, _lines(100, 200)),
        _run("redelivery", 1, 3.0, _lines(100, 0)),
        _run("baseline", 2, 1.2, _lines(0, 0)),
        _run("effects", 2, 9.0, _lines(100, 200)),
        _run("redelivery", 2, 3.0, _lines(100, 0)),
    ]
    return {
        "quick": False,
        "command": "python -m bench effects",
        "started": "2026-11-30T10:00:00+0000",
        "wall_seconds": 60.0,
        **summarise(runs, EffectsConfig(records_per_shard=25, shards=4, rounds=2)),
    }


def test_the_summary_gives_ratios_within_the_run_and_units_per_record() -> None:
    summary = _result()["summary"]
    effects, base = summary["effects"], summary["baseline"]
    # Medians of the rounds' rates: baseline steady 100/0.1 s and 100/0.2 s, effects
    # 100/10 s and 100/8 s.
    assert base["median_steady_rate"] == pytest.approx(750.0)
    assert effects["median_steady_rate"] == pytest.approx(11.25)
    assert effects["steady_ratio_to_baseline"] == pytest.approx(11.25 / 750.0)
    # Per record: one GetItem and two transactions (their items not counted as calls),
    # a checkpoint per 100; coordination kept apart.
    assert effects["per_record"]["requests"] == pytest.approx(3.01)
    assert effects["per_record"]["read_units"] == pytest.approx(1.0)
    assert effects["per_record"]["write_units"] == pytest.approx(8.01)
    assert effects["coordination"]["requests"] == 6
    assert summary["redelivery"]["per_record"]["requests"] == pytest.approx(1.01)
    assert summary["redelivery"]["effect_calls_per_record"] == 0


def test_the_report_and_the_summary_rows_show_both_ways() -> None:
    result = _result()
    text = render(result)
    assert "steady x baseline" in text
    assert "TransactWriteItems item: Put on effects" in text
    table = summary_table({"effects": result})
    rows = [line for line in table.splitlines() if line.startswith("| effects")]
    assert len(rows) == 4
    assert "3.010 requests, 1.000 RRU, 8.010 WRU" in rows[1]
    assert "no store 0.010 requests" in rows[1]
    assert "**0.015x**" in rows[0]
