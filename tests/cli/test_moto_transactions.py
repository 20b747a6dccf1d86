"""The embedded moto runs a transaction that cannot need its rollback without copying
its tables, and every other one as moto does: the same answers either way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table

from consumer.cli.emulators import moto_transactions


@dataclass
class Tables:
    client: Any
    leases: str
    effects: str

    def effect(self, owner: str, key: str = "e1") -> list[dict[str, Any]]:
        """The effects store's shape: a check of the lease, a conditional put."""
        return [
            {
                "ConditionCheck": {
                    "TableName": self.leases,
                    "Key": {"k": {"S": "shard"}},
                    "ConditionExpression": "#o = :o",
                    "ExpressionAttributeNames": {"#o": "owner"},
                    "ExpressionAttributeValues": {":o": {"S": owner}},
                }
            },
            {
                "Put": {
                    "TableName": self.effects,
                    "Item": {"k": {"S": key}, "state": {"S": "IN_PROGRESS"}},
                    "ConditionExpression": "attribute_not_exists(k)",
                }
            },
        ]

    def get(self, key: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(
            TableName=self.effects, Key={"k": {"S": key}}
        ).get("Item")
        return item


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tables]:
    """moto in this process (not the session's local stack, should a test have pointed
    the environment at it), with two tables."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    moto_transactions.install()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        out = Tables(client, f"leases-{uuid.uuid4().hex[:8]}", f"effects-{uuid.uuid4().hex[:8]}")
        for table in (out.leases, out.effects):
            client.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        client.put_item(TableName=out.leases, Item={"k": {"S": "shard"}, "owner": {"S": "w1"}})
        yield out


def test_a_transaction_whose_conditions_hold_runs_without_copying_its_tables(
    tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Table, memo: object) -> Table:
        raise AssertionError(f"table {self.name} copied")

    monkeypatch.setattr(Table, "__deepcopy__", refuse, raising=False)
    tables.client.transact_write_items(TransactItems=tables.effect("w1"))
    item = tables.get("e1")
    assert item is not None
    assert item["state"] == {"S": "IN_PROGRESS"}


@pytest.mark.parametrize(
    ("owner", "key", "reasons"),
    [
        ("w2", "e2", ["ConditionalCheckFailed", "None"]),  # the lease moved: nothing put
        ("w1", "e1", ["None", "ConditionalCheckFailed"]),  # the record is there already
    ],
)
def test_a_cancelled_transaction_writes_nothing_and_says_why(
    tables: Tables, owner: str, key: str, reasons: list[str]
) -> None:
    tables.client.transact_write_items(TransactItems=tables.effect("w1"))
    with pytest.raises(ClientError) as caught:
        tables.client.transact_write_items(TransactItems=tables.effect(owner, key))
    response: Any = caught.value.response
    assert [r["Code"] for r in response["CancellationReasons"]] == reasons
    assert tables.get("e2") is None


def test_only_checks_and_one_put_or_delete_whose_conditions_hold_skip_the_backup(
    tables: Tables,
) -> None:
    backend = next(  # the account moto took from the environment
        regions["us-east-1"]
        for _, regions in dynamodb_backends.items()
        if tables.leases in regions["us-east-1"].tables
    )
    assert moto_transactions.needs_no_backup(backend, tables.effect("w1"))
    assert not moto_transactions.needs_no_backup(backend, tables.effect("w2"))
    two_puts = [tables.effect("w1", "a")[1], tables.effect("w1", "b")[1]]
    assert not moto_transactions.needs_no_backup(backend, two_puts)
    key = {"k": {"S": "a"}}
    update = {"TableName": tables.effects, "Key": key, "UpdateExpression": "SET x = :x"}
    assert not moto_transactions.needs_no_backup(backend, [{"Update": update}])
