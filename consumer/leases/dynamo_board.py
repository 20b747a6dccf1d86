"""The board on DynamoDB: one item, one nested map per worker, conditional UpdateItem.

Item layout (``leaseKey`` = ``lander-board``)::

    joins (N)   slots (M): worker id -> {c (N) counter, j (N) join order, g (N) notices,
                                         n (N) leases held, l (BOOL) leaving,
                                         i (L of S) incoming lease keys, f (BOOL) fenced,
                                         u (N) CPU percent, t (N) wall-clock ms of
                                         the last beat, for people, p (S) the
                                         process's token: its claim on the worker id,
                                         a (S) host:port others wake it at}

Every beat is an UpdateItem on the worker's own map, conditioned on its counter and on
it not being fenced, returning the whole item (``ALL_NEW``): the read every worker
needs to watch the others comes with its own write. Nested attributes are changed with
``SET`` arithmetic and ``list_append`` only (DynamoDB's ``ADD`` and ``DELETE`` work on
top-level attributes alone).

The base class also holds what the lease store shares with it: the client, the table,
the error translation and KCL 3.x's owner index.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import structlog
from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import error_code, http_status
from consumer.leases.board import BOARD_KEY, Board
from consumer.leases.board_item import board_from_item, slot_item
from consumer.leases.model import RESERVED_PREFIX, wall_ms
from consumer.leases.store import Expect, LeaseStoreError, SlotLostError, TableMissingError

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

log = structlog.get_logger("consumer.leases")

OWNER_INDEX = "LeaseOwnerToLeaseKeyIndex"
"""KCL 3.x's global secondary index on ``leaseOwner`` (keys only), reused as is."""
JOIN_ATTEMPTS = 20

P = ParamSpec("P")
R = TypeVar("R")
_THROTTLED = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
}
_LIVE = "attribute_exists(slots.#w) AND attribute_not_exists(slots.#w.f)"


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


class DynamoBoard:
    """The board item of a lease table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    async def _describe(self) -> Mapping[str, Any] | None:
        """The table's description, or None while it does not exist."""
        try:
            described = await self._client.describe_table(TableName=self._table)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            return None
        return described["Table"]

    async def _status(self) -> str | None:
        """The table's status, or None while it does not exist."""
        table = await self._describe()
        return None if table is None else table.get("TableStatus")

    async def table_exists(self) -> bool:
        """Whether the table exists (in any status)."""
        return await self._describe() is not None

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
        words (``lander run --check``); empty when the table is ready as it is."""
        table = await self._describe()
        if table is None:
            return [f"create the lease table {self._table} (on-demand, with {OWNER_INDEX})"]
        indexes = {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])}
        if OWNER_INDEX in indexes:
            return []
        return [f"add the index {OWNER_INDEX} to the lease table {self._table} (UpdateTable)"]

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
                if not await self.table_exists():
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

    @aws_errors
    async def read_board(self) -> Board:
        """GetItem, strongly consistent."""
        try:
            response = await self._client.get_item(
                TableName=self._table, Key={"leaseKey": {"S": BOARD_KEY}}, ConsistentRead=True
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._table) from None
            raise
        item = response.get("Item")
        return Board() if item is None else board_from_item(item)

    @aws_errors
    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Board:
        """Put a fresh slot, conditioned on the board's join count and on the previous
        slot's counter, so neither a concurrent join nor a late beat is overwritten."""
        for _ in range(JOIN_ATTEMPTS):
            board = await self.read_board()
            if not board.slots and board.joins == 0:
                await self._create_board()
            previous = board.slots.get(worker)
            if expect not in ("any", None if previous is None else previous.counter):
                raise SlotLostError(f"board slot of {worker} changed before the join")
            counter = 0 if previous is None else previous.counter + 1
            slot = slot_item(counter, board.joins, instance, address)
            values: dict[str, Any] = {
                ":joins": {"N": str(board.joins)},
                ":next": {"N": str(board.joins + 1)},
                ":slot": {"M": slot},
            }
            condition = "joins = :joins AND attribute_not_exists(slots.#w)"
            if previous is not None:
                condition = "joins = :joins AND slots.#w.c = :previous"
                values[":previous"] = {"N": str(previous.counter)}
            try:
                response = await self._client.update_item(
                    TableName=self._table,
                    Key={"leaseKey": {"S": BOARD_KEY}},
                    UpdateExpression="SET slots.#w = :slot, joins = :next",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#w": worker},
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    continue
                raise
            return board_from_item(response["Attributes"])
        raise LeaseStoreError(f"could not join the board in {JOIN_ATTEMPTS} tries", retriable=True)

    async def _create_board(self) -> None:
        try:
            await self._client.put_item(
                TableName=self._table,
                Item={"leaseKey": {"S": BOARD_KEY}, "joins": {"N": "0"}, "slots": {"M": {}}},
                ConditionExpression="attribute_not_exists(leaseKey)",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    @aws_errors
    async def beat(
        self, worker: str, counter: int, *, held: int, leaving: bool, read: int, cpu: float = 0.0
    ) -> Board:
        """Counter + 1 on the worker's own slot, returning the whole board."""
        expression = (
            "SET slots.#w.c = :next, slots.#w.n = :held, slots.#w.l = :leaving, "
            "slots.#w.u = :cpu, slots.#w.t = :now"
        )
        if read:
            expression += " REMOVE " + ", ".join(f"slots.#w.i[{k}]" for k in range(read))
        try:
            response = await self._client.update_item(
                TableName=self._table,
                Key={"leaseKey": {"S": BOARD_KEY}},
                UpdateExpression=expression,
                ConditionExpression="slots.#w.c = :counter AND attribute_not_exists(slots.#w.f)",
                ExpressionAttributeNames={"#w": worker},
                ExpressionAttributeValues={
                    ":counter": {"N": str(counter)},
                    ":next": {"N": str(counter + 1)},
                    ":held": {"N": str(held)},
                    ":leaving": {"BOOL": leaving},
                    ":cpu": {"N": f"{cpu:.1f}"},
                    ":now": {"N": str(wall_ms())},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                raise SlotLostError(f"board slot of {worker} fenced, removed or replaced") from None
            if code == "ResourceNotFoundException":
                raise SlotLostError("lease table does not exist") from None
            raise
        return board_from_item(response["Attributes"])

    @aws_errors
    async def fence(self, worker: str, counter: int) -> bool:
        """Set ``f`` if the counter is still the one watched."""
        return await self._conditional(
            worker,
            "SET slots.#w.f = :true",
            "slots.#w.c = :counter AND attribute_not_exists(slots.#w.f)",
            {":counter": {"N": str(counter)}, ":true": {"BOOL": True}},
        )

    @aws_errors
    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        """Append to ``i``."""
        return await self._conditional(
            worker,
            "SET slots.#w.i = list_append(slots.#w.i, :keys)",
            _LIVE,
            {":keys": {"L": [{"S": key} for key in keys]}},
        )

    @aws_errors
    async def notify(self, worker: str) -> bool:
        """``g`` + 1."""
        return await self._conditional(
            worker, "SET slots.#w.g = slots.#w.g + :one", _LIVE, {":one": {"N": "1"}}
        )

    @aws_errors
    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        """REMOVE the worker's map."""
        if counter is None:
            return await self._conditional(
                worker, "REMOVE slots.#w", "attribute_exists(slots.#w.f)", {}
            )
        return await self._conditional(
            worker,
            "REMOVE slots.#w",
            "slots.#w.c = :counter AND attribute_not_exists(slots.#w.f)",
            {":counter": {"N": str(counter)}},
        )

    async def _conditional(
        self, worker: str, expression: str, condition: str, values: dict[str, Any]
    ) -> bool:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"leaseKey": {"S": BOARD_KEY}},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#w": worker},
        }
        if values:
            kwargs["ExpressionAttributeValues"] = values
        try:
            await self._client.update_item(**kwargs)
        except ClientError as exc:
            if error_code(exc) in ("ConditionalCheckFailedException", "ResourceNotFoundException"):
                return False
            raise
        return True
