"""The DynamoDB lease table's mechanics shared by its stores: the client, errors,
describing and creating tables, and KCL 3.x's owner index."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import structlog
from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import error_code, http_status
from consumer.leases.model import RESERVED_PREFIX
from consumer.leases.store import LeaseStoreError, TableMissingError

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

log = structlog.get_logger("consumer.leases")

OWNER_INDEX = "LeaseOwnerToLeaseKeyIndex"
"""KCL 3.x's global secondary index on ``leaseOwner`` (keys only), reused as is."""

P = ParamSpec("P")
R = TypeVar("R")
_THROTTLED = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
}


def aws_errors(method: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """botocore's errors never leave the store: what a method does not turn into a
    lease error itself becomes a :class:`LeaseStoreError`."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            status, code = http_status(exc), error_code(exc)
            retriable = status == 0 or status >= 500 or code in _THROTTLED
            raise LeaseStoreError(
                f"DynamoDB {code or type(exc).__name__}: {str(exc)[:300]}", retriable=retriable
            ) from exc

    return call


REFUSED = ("ConditionalCheckFailedException", "ResourceNotFoundException")
"""Error codes of a conditional write DynamoDB refused: the condition failed, or the
item's table is not there."""


async def unless_refused(call: Awaitable[R]) -> R | None:
    """The response of a conditional write, or None if DynamoDB refused it
    (:data:`REFUSED`)."""
    try:
        return await call
    except ClientError as exc:
        if error_code(exc) in REFUSED:
            return None
        raise


def owner_index() -> Any:
    """The index definition, as KCL 3.x creates it."""
    return {
        "IndexName": OWNER_INDEX,
        "KeySchema": [
            {"AttributeName": "leaseOwner", "KeyType": "HASH"},
            {"AttributeName": "leaseKey", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }


WORKERS_SUFFIX = "-workers"
"""The workers table is the lease table's name plus this (:mod:`.dynamo_board`)."""


class DynamoTable:
    """A lease table and its workers table on DynamoDB: what both stores share."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table
        self._workers = table + WORKERS_SUFFIX

    async def _describe(self, table: str | None = None) -> Mapping[str, Any] | None:
        """A table's description (the lease table's by default), or None while it does
        not exist."""
        try:
            described = await self._client.describe_table(TableName=table or self._table)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            return None
        return described["Table"]

    async def _status(self, table: str | None = None) -> str | None:
        """A table's status, or None while it does not exist."""
        described = await self._describe(table)
        return None if described is None else described.get("TableStatus")

    async def table_exists(self) -> bool:
        """Whether the lease table and its workers table exist (in any status)."""
        return (
            await self._describe() is not None and await self._describe(self._workers) is not None
        )

    async def _create(self, table: str, key: str, **extra: Any) -> None:
        """Create an on-demand table keyed by ``key`` unless it exists; wait until ACTIVE."""
        if await self._status(table) == "ACTIVE":
            return
        definitions = [{"AttributeName": key, "AttributeType": "S"}, *extra.pop("attributes", [])]
        try:
            await self._client.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=definitions,
                BillingMode="PAY_PER_REQUEST",
                **extra,
            )
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise
        for _ in range(600):
            if await self._status(table) == "ACTIVE":
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"table {table} did not become ACTIVE")

    @aws_errors
    async def ensure_owner_index(self) -> bool:
        """Add ``LeaseOwnerToLeaseKeyIndex`` to a table that lacks it (one made by KCL
        2.x or an older lander); True once the index is ACTIVE. Without the right to
        UpdateTable, say so once: :meth:`owned_by` scans meanwhile."""
        table = await self._describe()
        if table is None:
            return False
        indexes = {i["IndexName"]: i for i in table.get("GlobalSecondaryIndexes", [])}
        if OWNER_INDEX in indexes:
            return bool(indexes[OWNER_INDEX].get("IndexStatus", "ACTIVE") == "ACTIVE")
        create = owner_index()
        throughput = table.get("ProvisionedThroughput", {})
        billing = table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
        if billing == "PROVISIONED" and throughput.get("ReadCapacityUnits"):
            create["ProvisionedThroughput"] = {
                "ReadCapacityUnits": throughput["ReadCapacityUnits"],
                "WriteCapacityUnits": throughput["WriteCapacityUnits"],
            }
        try:
            await self._client.update_table(
                TableName=self._table,
                AttributeDefinitions=[
                    {"AttributeName": "leaseKey", "AttributeType": "S"},
                    {"AttributeName": "leaseOwner", "AttributeType": "S"},
                ],
                GlobalSecondaryIndexUpdates=[{"Create": create}],
            )
        except ClientError as exc:
            # Any refusal (no right to UpdateTable, a limit, an index being built, or a
            # ValidationException such as dynalite's for an on-demand table) only costs
            # the index: owners are found by Scan, as before it existed.
            message = str(exc.response.get("Error", {}).get("Message", ""))[:200]
            log.warning(
                "could not add the lease owner index; owners are found by Scan meanwhile",
                index=OWNER_INDEX,
                table=self._table,
                error=error_code(exc),
                reason=message,
            )
            return False
        log.info("lease owner index requested; owners by Scan until it is built", index=OWNER_INDEX)
        return False

    @aws_errors
    async def table_changes(self) -> list[str]:
        """What :meth:`ensure_table` and :meth:`ensure_owner_index` would change, in
        words (``lander run --check``); empty when the tables are ready as they are."""
        changes: list[str] = []
        table = await self._describe()
        if table is None:
            changes.append(f"create the lease table {self._table} (on-demand, with {OWNER_INDEX})")
        elif OWNER_INDEX not in {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])}:
            changes.append(
                f"add the index {OWNER_INDEX} to the lease table {self._table} (UpdateTable)"
            )
        if await self._describe(self._workers) is None:
            changes.append(f"create the workers table {self._workers} (on-demand)")
        return changes

    @aws_errors
    async def owned_by(self, owner: str) -> list[str]:
        """Query ``LeaseOwnerToLeaseKeyIndex``; an eventually consistent Scan while the
        index does not exist or is still being built."""
        keys: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": OWNER_INDEX,
                "KeyConditionExpression": "leaseOwner = :owner",
                "ExpressionAttributeValues": {":owner": {"S": owner}},
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            try:
                page = await self._client.query(**kwargs)
            except ClientError as exc:
                if error_code(exc) not in ("ValidationException", "ResourceNotFoundException"):
                    raise
                if await self._describe() is None:
                    raise TableMissingError(self._table) from None
                return await self._owned_by_scan(owner)
            keys.extend(
                item["leaseKey"]["S"]
                for item in page.get("Items", [])
                if not item["leaseKey"]["S"].startswith(RESERVED_PREFIX)
            )
            start = dict(page.get("LastEvaluatedKey") or {})
            if not start:
                return sorted(keys)

    async def _owned_by_scan(self, owner: str) -> list[str]:
        """Keys naming ``owner``, by an eventually consistent Scan (no index yet)."""
        keys: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "ConsistentRead": False,
                "FilterExpression": "leaseOwner = :owner",
                "ProjectionExpression": "leaseKey",
                "ExpressionAttributeValues": {":owner": {"S": owner}},
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            page = await self._client.scan(**kwargs)
            keys.extend(item["leaseKey"]["S"] for item in page.get("Items", []))
            start = dict(page.get("LastEvaluatedKey") or {})
            if not start:
                return sorted(k for k in keys if not k.startswith(RESERVED_PREFIX))
