"""The lease table on DynamoDB: KCL's item layout, conditional UpdateItem everywhere.

Item layout (KCL 2.x/3.x names, so a KCL application's table can be adopted)::

    leaseKey (S, hash key)  leaseOwner (S)  leaseCounter (N)
    checkpoint (S)  checkpointSubSequenceNumber (N)  ownerSwitchesSinceCheckpoint (N)
    parentShardId (SS)  handoffTo (S)  handoffAck (S)   (a hand-off asked, acknowledged)
    streamName (S)  shardId (S)   (multi-stream leases, keyed account:stream:epoch:shard;
                                   their parentShardId holds shard ids, as in KCL)
    lastUpdateMs (N)  millisBehindLatest (N)   (informational, for `lander status`)
    throughputKBps (N, KCL 3.x's name)  recordsPerSecond (N)
                                               (the shard's load, with checkpoints)
    pendingRecords (N)  checkpointAgeMs (N)  shardFailures (N)  lastError (S)
                                               (the owner's report, informational)

Items keyed ``lander-...`` are the lander's own, never leases: :meth:`list_leases` leaves
them out. Each stream's landing record (``lander-landing:<stream>``, :mod:`.dynamo_landing`)
is current; worker-id claims and the single board item are left by earlier releases
(safe to delete). Workers' slots live
in a table of their own (:mod:`.dynamo_board`). New tables get KCL 3.x's global secondary index
``LeaseOwnerToLeaseKeyIndex`` (leaseOwner, leaseKey; keys only).

The literal owner ``"NULL"`` is read as "no owner", as some KCL versions write it.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from consumer.aws import error_code
from consumer.leases.dynamo_board import DynamoBoard
from consumer.leases.dynamo_landing import DynamoLanding
from consumer.leases.dynamo_table import aws_errors, owner_index, unless_refused
from consumer.leases.keys import parents_of_item, stream_attributes
from consumer.leases.model import (
    RESERVED_PREFIX,
    TABLE_GONE,
    Lease,
    LeaseLostError,
    ShardLoad,
    ShardReport,
    new_incarnation,
    wall_ms,
)
from consumer.leases.store import TableMissingError
from consumer.sequence import Checkpoint, checkpoint_from_item, checkpoint_to_item

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

Item = Mapping[str, Any]

ERROR_CHARS = 200
"""A reported error is cut to this many characters (the item stays small)."""
_OWNED = "leaseCounter = :counter AND leaseOwner = :owner"
_UNOWNED = "leaseCounter = :counter AND (attribute_not_exists(leaseOwner) OR leaseOwner = :null)"


class DynamoLeaseStore(DynamoBoard, DynamoLanding):
    """Leases in a DynamoDB table (created on demand, on-demand billing)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        super().__init__(client, table)

    @aws_errors
    async def ensure_table(self) -> None:
        """Create the lease table and its workers table where missing and wait until
        they are ACTIVE.

        Describes first, so a role that may use the tables but not create tables works
        against existing ones."""
        await self._create(
            self._table,
            "leaseKey",
            attributes=[{"AttributeName": "leaseOwner", "AttributeType": "S"}],
            GlobalSecondaryIndexes=[owner_index()],
        )
        await self.ensure_workers_table()

    @aws_errors
    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        """Scan every lease, following pagination."""
        leases: list[Lease] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {"TableName": self._table, "ConsistentRead": consistent}
            if start:
                kwargs["ExclusiveStartKey"] = start
            try:
                page = await self._client.scan(**kwargs)
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    raise TableMissingError(self._table) from None
                raise
            leases.extend(lease_from_item(item) for item in page.get("Items", []) if is_lease(item))
            start = dict(page.get("LastEvaluatedKey") or {})
            if not start:
                return leases

    @aws_errors
    async def get_lease(self, key: str) -> Lease | None:
        """GetItem, strongly consistent."""
        try:
            response = await self._client.get_item(
                TableName=self._table, Key={"leaseKey": {"S": key}}, ConsistentRead=True
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._table) from None
            raise
        item = response.get("Item")
        return None if item is None else lease_from_item(item)

    @aws_errors
    async def create_lease(self, key: str, parents: Set[str], checkpoint: Checkpoint) -> bool:
        """Put an unowned lease unless one exists."""
        value, sub = checkpoint_to_item(checkpoint)
        item: dict[str, Any] = {
            "leaseKey": {"S": key},
            "leaseCounter": {"N": "0"},
            "checkpoint": {"S": value},
            "checkpointSubSequenceNumber": {"N": str(sub)},
            "ownerSwitchesSinceCheckpoint": {"N": "0"},
            "leaseIncarnation": {"S": new_incarnation()},
        }
        item.update(stream_attributes(key, parents))
        try:
            await self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(leaseKey)",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._table) from None
            raise
        return True

    @aws_errors
    async def take(self, lease: Lease, owner: str) -> Lease:
        """Become the owner if counter and owner are as observed. A new owner drops any
        hand-off request; the owner named keeps one (asked between a give and its take).
        A stray checkpointOwner (a KCL 3.x hand-off left half-done) is void either way."""
        same = lease.owner == owner
        switches = "" if same else " ADD ownerSwitchesSinceCheckpoint :one"
        removes = "checkpointOwner" if same else "handoffTo, handoffAck, checkpointOwner"
        return await self._update(
            lease,
            "SET leaseOwner = :me, leaseCounter = :next REMOVE " + removes + switches,
            {":me": {"S": owner}},
            owned=lease.owner is not None,
        )

    @aws_errors
    async def renew(
        self, lease: Lease, lag_ms: int | None = None, report: ShardReport | None = None
    ) -> Lease:
        """Counter + 1, returning the item as it now is (hand-off requests included)."""
        sets = ["leaseCounter = :next"]
        values: dict[str, Any] = {}
        removes = ""
        if lag_ms is not None:
            sets.append("millisBehindLatest = :lag")
            values[":lag"] = {"N": str(lag_ms)}
        if report is not None:
            sets += [
                "pendingRecords = :pending",
                "checkpointAgeMs = :age",
                "shardFailures = :failures",
            ]
            values[":pending"] = {"N": str(report.pending)}
            values[":age"] = {"N": str(report.checkpoint_age_ms)}
            values[":failures"] = {"N": str(report.failures)}
            if report.last_error:
                sets.append("lastError = :error")
                values[":error"] = {"S": report.last_error[:ERROR_CHARS]}
            else:
                removes = " REMOVE lastError"
        return await self._update(lease, "SET " + ", ".join(sets) + removes, values)

    @aws_errors
    async def checkpoint(
        self,
        lease: Lease,
        checkpoint: Checkpoint,
        load: ShardLoad | None = None,
        lag_ms: int | None = None,
    ) -> Lease:
        """Record progress, fenced; the load as KCL 3.x's ``throughputKBps`` and the
        lander's ``recordsPerSecond``, and the lag (board workers renew nothing, so
        their checkpoints carry it to ``lander status``)."""
        value, sub = checkpoint_to_item(checkpoint)
        expression = (
            "SET leaseCounter = :next, checkpoint = :cp, checkpointSubSequenceNumber = :sub, "
            "ownerSwitchesSinceCheckpoint = :zero"
        )
        values = {":cp": {"S": value}, ":sub": {"N": str(sub)}, ":zero": {"N": "0"}}
        if load is not None:
            expression += ", throughputKBps = :kbps, recordsPerSecond = :rps"
            values[":kbps"] = {"N": f"{load.kb_per_second:.3f}"}
            values[":rps"] = {"N": f"{load.records_per_second:.3f}"}
        if lag_ms is not None:
            expression += ", millisBehindLatest = :lag"
            values[":lag"] = {"N": str(lag_ms)}
        return await self._update(lease, expression, values)

    @aws_errors
    async def request_handoff(self, lease: Lease, to: str, *, replacing: str | None = None) -> bool:
        """Write ``handoffTo`` if the lease still has the owner the caller saw and no
        request is pending. Not the counter: a busy owner checkpoints several times a
        second, and a request conditional on the counter it read would lose that race
        again and again (the request changes nothing the owner's fenced writes check)."""
        values = {":to": {"S": to}, ":owner": {"S": lease.owner or ""}}
        pending = "attribute_not_exists(handoffTo)"
        if replacing is not None:
            pending = "(attribute_not_exists(handoffTo) OR handoffTo = :stale)"
            values[":stale"] = {"S": replacing}
        condition = f"leaseOwner = :owner AND {pending}"
        return await self._if(lease.key, "SET handoffTo = :to REMOVE handoffAck", condition, values)

    @aws_errors
    async def acknowledge(self, key: str, to: str) -> bool:
        """Write ``handoffAck`` if ``handoffTo`` names ``to`` (the counter stays)."""
        return await self._if(key, "SET handoffAck = :to", "handoffTo = :to", {":to": {"S": to}})

    async def _if(self, key: str, expression: str, condition: str, values: dict[str, Any]) -> bool:
        """A conditional UpdateItem that is not a fenced write: False when the condition
        (or the table) is not there, instead of a lost lease."""
        update = self._client.update_item(
            TableName=self._table,
            Key={"leaseKey": {"S": key}},
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return await unless_refused(update) is not None

    @aws_errors
    async def withdraw(self, key: str, to: str) -> bool:
        """Remove ``handoffTo`` and ``handoffAck`` if ``handoffTo`` names ``to``."""
        return await self._if(
            key, "REMOVE handoffTo, handoffAck", "handoffTo = :to", {":to": {"S": to}}
        )

    @aws_errors
    async def transfer(self, lease: Lease, to: str) -> bool:
        """Hand the lease to ``to`` if ``handoffTo`` still names it. A refusal is told
        apart by reading the lease: unchanged owner and counter mean only the request
        was gone (False); anything else is a lost lease."""
        try:
            await self._update(
                lease,
                "SET leaseOwner = :to, leaseCounter = :next ADD ownerSwitchesSinceCheckpoint "
                ":one REMOVE handoffTo, handoffAck",
                {":to": {"S": to}},
                also="handoffTo = :to",
            )
        except LeaseLostError:
            current = await self.get_lease(lease.key)
            if current is None or (current.owner, current.counter) != (lease.owner, lease.counter):
                raise
            return False
        return True

    @aws_errors
    async def release(self, lease: Lease) -> None:
        """Clear the owner so any worker may take the lease at once."""
        await self._update(
            lease, "SET leaseCounter = :next REMOVE leaseOwner, handoffTo, handoffAck", {}
        )

    @aws_errors
    async def delete_lease(self, key: str) -> None:
        """Remove a lease item."""
        await self._client.delete_item(TableName=self._table, Key={"leaseKey": {"S": key}})

    async def _update(
        self,
        lease: Lease,
        expression: str,
        values: dict[str, Any],
        owned: bool = True,
        *,
        also: str | None = None,
    ) -> Lease:
        """A fenced write: the owner (or no owner), counter and incarnation as ``lease``
        has them, and ``also`` if given; LeaseLostError when refused."""
        values = {
            **values,
            ":counter": {"N": str(lease.counter)},
            ":next": {"N": str(lease.counter + 1)},
        }
        if ":one" in expression:
            values[":one"] = {"N": "1"}
        # Every write stamps the wall clock, for people reading the table (status).
        expression = expression.replace("SET ", "SET lastUpdateMs = :now, ", 1)
        values[":now"] = {"N": str(wall_ms())}
        if owned:
            values[":owner"] = {"S": lease.owner or ""}
        else:
            values[":null"] = {"S": "NULL"}
        condition = [_OWNED if owned else _UNOWNED]
        if lease.incarnation is None:
            condition.append("attribute_not_exists(leaseIncarnation)")
        else:
            condition.append("leaseIncarnation = :incarnation")
            values[":incarnation"] = {"S": lease.incarnation}
        if also is not None:
            condition.append(also)
        try:
            response = await self._client.update_item(
                TableName=self._table,
                Key={"leaseKey": {"S": lease.key}},
                UpdateExpression=expression,
                ConditionExpression=" AND ".join(condition),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                raise LeaseLostError(lease.key) from None
            if code == "ResourceNotFoundException":
                raise LeaseLostError(lease.key, TABLE_GONE) from None
            raise
        return lease_from_item(response["Attributes"])


KCL_LEASE_ENTITY = "LEASE"
"""KCL 3.5+ keeps its leader lock, migration state and worker metrics in the lease table
beside the leases, each item marked with an ``entityType``; a lease's is this (items
without one, as KCL 2.x and 3.0-3.4 write them, are leases too)."""


def is_lease(item: Item) -> bool:
    """Whether a lease-table item is a shard lease: not one of the lander's own items
    (worker-id claims, the board), nor one of KCL 3.5's other entities (``Leader``,
    ``Migration3.0``, worker metrics)."""
    if item["leaseKey"]["S"].startswith(RESERVED_PREFIX):
        return False
    entity: str = item.get("entityType", {}).get("S", KCL_LEASE_ENTITY)
    return entity == KCL_LEASE_ENTITY


def lease_from_item(item: Item) -> Lease:
    """Read a lease item; tolerant of KCL's optional attributes."""
    owner = item.get("leaseOwner", {}).get("S")
    return Lease(
        key=item["leaseKey"]["S"],
        owner=None if owner in (None, "", "NULL") else owner,
        counter=int(item.get("leaseCounter", {}).get("N", "0")),
        checkpoint=checkpoint_from_item(
            item.get("checkpoint", {}).get("S", "TRIM_HORIZON"),
            int(item.get("checkpointSubSequenceNumber", {}).get("N", "0")),
        ),
        owner_switches=int(item.get("ownerSwitchesSinceCheckpoint", {}).get("N", "0")),
        parents=parents_of_item(item),
        handoff_to=item.get("handoffTo", {}).get("S"),
        handoff_ack=item.get("handoffAck", {}).get("S"),
        updated_ms=_optional_int(item, "lastUpdateMs"),
        lag_ms=_optional_int(item, "millisBehindLatest"),
        report=_report(item),
        load=_load(item),
        incarnation=item.get("leaseIncarnation", {}).get("S"),
    )


def _load(item: Item) -> ShardLoad | None:
    if "throughputKBps" not in item and "recordsPerSecond" not in item:
        return None
    return ShardLoad(
        records_per_second=float(item.get("recordsPerSecond", {}).get("N", "0")),
        kb_per_second=float(item.get("throughputKBps", {}).get("N", "0")),
    )


def _report(item: Item) -> ShardReport | None:
    if "pendingRecords" not in item:
        return None
    return ShardReport(
        pending=_optional_int(item, "pendingRecords") or 0,
        checkpoint_age_ms=_optional_int(item, "checkpointAgeMs") or 0,
        failures=_optional_int(item, "shardFailures") or 0,
        last_error=item.get("lastError", {}).get("S"),
    )


def _optional_int(item: Item, name: str) -> int | None:
    raw = item.get(name, {}).get("N")
    return None if raw is None else int(raw)
