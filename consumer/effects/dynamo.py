"""The effects table on DynamoDB: one item per effect key, beside the lease table.

Item layout::

    effectKey (S, hash key)  effectState (S)  leaseKey (S)  claimOwner (S)  claimId (S)
    payloadHash (S)  expiresAt (N, epoch seconds: the table's TTL attribute)
    result (S, JSON; COMPLETED only)  writtenMs (N)  covers (S, a group's last position)

A table of its own, not the lease table under a reserved prefix: a busy processor
writes millions of records a day, and every scan of the lease table (the leader's,
``lander status``) would read them; and its TTL is switched on without touching a
table a KCL application may share. Every write is one TransactWriteItems: a condition
check that the shard's lease item is still as its holder last wrote it (owner,
counter, incarnation) and the conditional put, so a worker that lost the lease can
neither claim nor complete.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import error_code, http_status
from consumer.effects.model import Effect, State, Tenure
from consumer.effects.store import EffectRaceError, EffectStoreError
from consumer.leases.dynamo_table import DynamoTable
from consumer.leases.model import Lease, LeaseLostError, wall_ms

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

EFFECTS_SUFFIX = "-effects"
"""The effects table's default name is the lease table's plus this."""
TTL_ATTRIBUTE = "expiresAt"


def _item(effect: Effect) -> dict[str, Any]:
    item: dict[str, Any] = {
        "effectKey": {"S": effect.key},
        "effectState": {"S": effect.state.value},
        "leaseKey": {"S": effect.tenure.lease},
        "claimOwner": {"S": effect.tenure.owner},
        "claimId": {"S": effect.tenure.claim},
        "payloadHash": {"S": effect.payload_hash},
        TTL_ATTRIBUTE: {"N": str(effect.expires)},
        "writtenMs": {"N": str(effect.written_ms or wall_ms())},
    }
    if effect.result is not None:
        item["result"] = {"S": effect.result}
    if effect.covers is not None:
        item["covers"] = {"S": effect.covers}
    return item


def effect_from_item(item: dict[str, Any]) -> Effect:
    """Read an item written by :func:`_item`."""
    return Effect(
        key=item["effectKey"]["S"],
        state=State(item["effectState"]["S"]),
        tenure=Tenure(item["leaseKey"]["S"], item["claimOwner"]["S"], item["claimId"]["S"]),
        payload_hash=item["payloadHash"]["S"],
        expires=int(item[TTL_ATTRIBUTE]["N"]),
        result=item["result"]["S"] if "result" in item else None,
        written_ms=int(item.get("writtenMs", {}).get("N", "0")),
        covers=item["covers"]["S"] if "covers" in item else None,
    )


def _lease_check(table: str, fence: Lease) -> dict[str, Any]:
    values: dict[str, Any] = {
        ":owner": {"S": fence.owner or ""},
        ":counter": {"N": str(fence.counter)},
    }
    condition = "leaseOwner = :owner AND leaseCounter = :counter AND "
    if fence.incarnation is None:
        condition += "attribute_not_exists(leaseIncarnation)"
    else:
        condition += "leaseIncarnation = :incarnation"
        values[":incarnation"] = {"S": fence.incarnation}
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": {"leaseKey": {"S": fence.key}},
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
    }


def _failure(exc: BaseException) -> EffectStoreError:
    status, code = http_status(exc), error_code(exc)
    throttled = "Throttl" in code or code in ("LimitExceededException", "RequestLimitExceeded")
    retriable = status == 0 or status >= 500 or throttled
    return EffectStoreError(
        f"DynamoDB {code or type(exc).__name__}: {str(exc)[:300]}", retriable=retriable
    )


class DynamoEffectStore(DynamoTable):
    """Effect records in a DynamoDB table (created on first use, on-demand, with TTL)."""

    def __init__(self, client: DynamoDBClient, table: str, lease_table: str) -> None:
        super().__init__(client, lease_table)
        self.table = table
        self._ready = False
        self._lock = asyncio.Lock()

    async def ensure_table(self) -> None:
        """Create the effects table where missing, with TTL on ``expiresAt``."""
        async with self._lock:
            if self._ready:
                return
            try:
                await self._create(self.table, "effectKey")
                ttl = await self._client.describe_time_to_live(TableName=self.table)
                status = ttl.get("TimeToLiveDescription", {}).get("TimeToLiveStatus")
                if status not in ("ENABLED", "ENABLING"):
                    await self._client.update_time_to_live(
                        TableName=self.table,
                        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
                    )
            except (ClientError, BotoCoreError) as exc:
                raise _failure(exc) from exc
            self._ready = True

    async def check(self) -> None:
        """Create the table where missing (with TTL), then read one key."""
        await self.read("lander-check")

    async def read(self, key: str) -> Effect | None:
        """GetItem, strongly consistent."""
        await self.ensure_table()
        try:
            response = await self._client.get_item(
                TableName=self.table, Key={"effectKey": {"S": key}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise _failure(exc) from exc
        item = response.get("Item")
        return None if item is None else effect_from_item(dict(item))

    async def write(self, effect: Effect, fence: Lease, *, over: Effect | None) -> None:
        """The lease's condition check and the conditional put, in one transaction."""
        await self.ensure_table()
        put: dict[str, Any] = {"TableName": self.table, "Item": _item(effect)}
        if over is None:
            put["ConditionExpression"] = "attribute_not_exists(effectKey)"
        else:
            put["ConditionExpression"] = "claimId = :claim AND effectState = :state"
            put["ExpressionAttributeValues"] = {
                ":claim": {"S": over.tenure.claim},
                ":state": {"S": over.state.value},
            }
        try:
            items: Any = [_lease_check(self._table, fence), {"Put": put}]
            await self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            code = error_code(exc)
            if code == "TransactionCanceledException":
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                if reasons[:1] == ["ConditionalCheckFailed"]:
                    raise LeaseLostError(
                        fence.key, "the lease changed before the effect's write"
                    ) from None
                if reasons[1:2] == ["ConditionalCheckFailed"]:
                    raise EffectRaceError(f"effect {effect.key} changed under its writer") from None
            if code == "ResourceNotFoundException":
                raise LeaseLostError(fence.key, "lease table does not exist") from None
            raise _failure(exc) from exc
        except BotoCoreError as exc:
            raise _failure(exc) from exc

    async def release(self, effect: Effect) -> bool:
        """A conditional DeleteItem of the claim."""
        await self.ensure_table()
        try:
            await self._client.delete_item(
                TableName=self.table,
                Key={"effectKey": {"S": effect.key}},
                ConditionExpression="claimId = :claim AND effectState = :state",
                ExpressionAttributeValues={
                    ":claim": {"S": effect.tenure.claim},
                    ":state": {"S": effect.state.value},
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise _failure(exc) from exc
        except BotoCoreError as exc:
            raise _failure(exc) from exc
        return True
