"""The workers table on DynamoDB: one item per worker and the leader item, every write
a conditional UpdateItem or PutItem.

The table is the lease table's name plus ``-workers``, keyed by ``itemKey`` (S),
on-demand. Item layout::

    worker/<worker id>:  c (N) counter, j (N) when it joined (ms), g (N) notices,
                         n (N) leases held, l (BOOL) leaving, x (BOOL) leaving because
                         it cannot land, i (L of S) incoming lease keys, f (BOOL)
                         fenced, u (N) CPU percent, t (N) wall-clock ms of the last
                         beat, for people, p (S) the process's token: its
                         claim on the worker id, a (S) host:port others wake it at
    leader:              w (S) the leader, c (N) its counter, d (S) the deputy,
                         a (S) host:port the leader is woken at

Every beat is an UpdateItem on the worker's own item, conditioned on its counter and
on it not being fenced, returning the item (``ALL_NEW``): the read of its incoming
leases and notices comes with its own write, one write unit whatever the fleet's size.
The leader reads every item with one eventually consistent Scan a second: a slot is
about 150 bytes, so a thousand workers are about 40 read units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from consumer.aws import error_code
from consumer.leases.board import Board, Leadership, Slot
from consumer.leases.board_item import (
    KEY,
    LEADER_KEY,
    leadership_from_item,
    leadership_item,
    slot_from_item,
    slot_item,
    slot_key,
    worker_of,
)
from consumer.leases.dynamo_table import DynamoTable, aws_errors, unless_refused
from consumer.leases.model import wall_ms
from consumer.leases.store import Expect, SlotLostError, TableMissingError

_LIVE = "attribute_exists(c) AND attribute_not_exists(f)"
_LEADER = {KEY: {"S": LEADER_KEY}}


class DynamoBoard(DynamoTable):
    """The workers table of a lease table."""

    async def ensure_workers_table(self) -> None:
        """Create the workers table if it is missing and wait until it is ACTIVE."""
        await self._create(self._workers, KEY)

    @aws_errors
    async def read_board(self) -> Board:
        """Scan the workers table, eventually consistent."""
        slots: dict[str, Slot] = {}
        leadership: Leadership | None = None
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {"TableName": self._workers, "ConsistentRead": False}
            if start:
                kwargs["ExclusiveStartKey"] = start
            try:
                page = await self._client.scan(**kwargs)
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    raise TableMissingError(self._workers) from None
                raise
            for item in page.get("Items", []):
                worker = worker_of(item)
                if worker is not None:
                    slots[worker] = slot_from_item(item)
                elif item[KEY]["S"] == LEADER_KEY:
                    leadership = leadership_from_item(item)
            start = dict(page.get("LastEvaluatedKey") or {})
            if not start:
                return Board(slots=slots, leadership=leadership)

    @aws_errors
    async def read_slot(self, worker: str) -> Slot | None:
        """GetItem, strongly consistent."""
        item = await self._get(slot_key(worker), consistent=True)
        return None if item is None else slot_from_item(item)

    async def _get(self, key: Any, *, consistent: bool) -> Any:
        try:
            response = await self._client.get_item(
                TableName=self._workers, Key=key, ConsistentRead=consistent
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._workers) from None
            raise
        return response.get("Item")

    @aws_errors
    async def join(
        self,
        worker: str,
        instance: str | None = None,
        *,
        expect: Expect = "any",
        address: str | None = None,
    ) -> Slot:
        """Put a fresh slot, conditioned on the previous slot's counter (or on there
        being none), so a late beat of an earlier process is never overwritten."""
        previous = await self.read_slot(worker)
        if expect not in ("any", None if previous is None else previous.counter):
            raise SlotLostError(f"slot of {worker} changed before the join")
        counter = 0 if previous is None else previous.counter + 1
        item = slot_item(worker, counter, wall_ms(), instance, address)
        kwargs: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(c)"}
        if previous is not None:
            kwargs = {
                "ConditionExpression": "c = :previous",
                "ExpressionAttributeValues": {":previous": {"N": str(previous.counter)}},
            }
        try:
            await self._client.put_item(TableName=self._workers, Item=item, **kwargs)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise SlotLostError(f"slot of {worker} changed before the join") from None
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._workers) from None
            raise
        return slot_from_item(item)

    @aws_errors
    async def beat(
        self,
        worker: str,
        counter: int,
        *,
        held: int,
        leaving: bool,
        read: int,
        cpu: float = 0.0,
        unfit: bool = False,
    ) -> Slot:
        """Counter + 1 on the worker's own item, returning it."""
        expression = "SET c = :next, n = :held, l = :leaving, x = :unfit, u = :cpu, t = :now"
        if read:
            expression += " REMOVE " + ", ".join(f"i[{k}]" for k in range(read))
        try:
            response = await self._client.update_item(
                TableName=self._workers,
                Key=slot_key(worker),
                UpdateExpression=expression,
                ConditionExpression="c = :counter AND attribute_not_exists(f)",
                ExpressionAttributeValues={
                    ":counter": {"N": str(counter)},
                    ":next": {"N": str(counter + 1)},
                    ":held": {"N": str(held)},
                    ":leaving": {"BOOL": leaving},
                    ":unfit": {"BOOL": unfit},
                    ":cpu": {"N": f"{cpu:.1f}"},
                    ":now": {"N": str(wall_ms())},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                raise SlotLostError(f"slot of {worker} fenced, removed or replaced") from None
            if code == "ResourceNotFoundException":
                raise SlotLostError("workers table does not exist") from None
            raise
        return slot_from_item(response["Attributes"])

    @aws_errors
    async def fence(self, worker: str, counter: int) -> bool:
        """Set ``f`` if the counter is still the one watched."""
        return (
            await self._update_slot(
                slot_key(worker),
                "SET f = :true",
                "c = :counter AND attribute_not_exists(f)",
                {":counter": {"N": str(counter)}, ":true": {"BOOL": True}},
            )
            is not None
        )

    @aws_errors
    async def deliver(self, worker: str, keys: Sequence[str]) -> bool:
        """Append to ``i``."""
        values = {":keys": {"L": [{"S": key} for key in keys]}}
        return (
            await self._update_slot(
                slot_key(worker), "SET i = list_append(i, :keys)", _LIVE, values
            )
            is not None
        )

    @aws_errors
    async def notify(self, worker: str) -> Slot | None:
        """``g`` + 1, returning the slot."""
        item = await self._update_slot(
            slot_key(worker), "SET g = g + :one", _LIVE, {":one": {"N": "1"}}
        )
        return None if item is None else slot_from_item(item)

    @aws_errors
    async def remove_slot(self, worker: str, *, counter: int | None = None) -> bool:
        """DeleteItem: the worker's own (by counter), or a fenced one."""
        if counter is None:
            kwargs: dict[str, Any] = {"ConditionExpression": "attribute_exists(f)"}
        else:
            kwargs = {
                "ConditionExpression": "c = :counter AND attribute_not_exists(f)",
                "ExpressionAttributeValues": {":counter": {"N": str(counter)}},
            }
        return await self._delete(slot_key(worker), kwargs)

    @aws_errors
    async def read_leadership(self) -> Leadership | None:
        """GetItem of the leader item, eventually consistent."""
        item = await self._get(_LEADER, consistent=False)
        return None if item is None else leadership_from_item(item)

    @aws_errors
    async def claim_leadership(
        self, worker: str, counter: int | None, address: str | None = None
    ) -> Leadership | None:
        """PutItem of the leader item, where there is none or over ``counter``."""
        taken = Leadership(worker, 0 if counter is None else counter + 1, None, address)
        kwargs: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(c)"}
        if counter is not None:
            kwargs = {
                "ConditionExpression": "c = :counter",
                "ExpressionAttributeValues": {":counter": {"N": str(counter)}},
            }
        return taken if await self._put_leader(taken, kwargs) else None

    @aws_errors
    async def renew_leadership(
        self, worker: str, counter: int, *, deputy: str | None, address: str | None = None
    ) -> Leadership | None:
        """PutItem of the leader item with counter + 1, if still ``worker``'s at ``counter``."""
        renewed = Leadership(worker, counter + 1, deputy, address)
        condition = {
            "ConditionExpression": "w = :me AND c = :counter",
            "ExpressionAttributeValues": {":me": {"S": worker}, ":counter": {"N": str(counter)}},
        }
        return renewed if await self._put_leader(renewed, condition) else None

    async def _put_leader(self, leadership: Leadership, condition: dict[str, Any]) -> bool:
        """A conditional PutItem of the leader item; False if refused."""
        put = self._client.put_item(
            TableName=self._workers, Item=leadership_item(leadership), **condition
        )
        return await unless_refused(put) is not None

    @aws_errors
    async def resign_leadership(self, worker: str, counter: int) -> bool:
        """DeleteItem of the leader item, if still ``worker``'s at ``counter``."""
        return await self._delete(
            _LEADER,
            {
                "ConditionExpression": "w = :me AND c = :counter",
                "ExpressionAttributeValues": {
                    ":me": {"S": worker},
                    ":counter": {"N": str(counter)},
                },
            },
        )

    async def _update_slot(
        self, key: Any, expression: str, condition: str, values: dict[str, Any]
    ) -> Any:
        """A conditional UpdateItem; the item as written, or None if refused."""
        response = await unless_refused(
            self._client.update_item(
                TableName=self._workers,
                Key=key,
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        )
        return None if response is None else response["Attributes"]

    async def _delete(self, key: Any, kwargs: dict[str, Any]) -> bool:
        deleted = self._client.delete_item(TableName=self._workers, Key=key, **kwargs)
        return await unless_refused(deleted) is not None
