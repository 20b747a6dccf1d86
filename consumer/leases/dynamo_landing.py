"""Each stream's landing record in the DynamoDB lease table (:mod:`consumer.landing.fingerprint`).

One item per stream, keyed ``lander-landing:<stream>`` (a :data:`RESERVED_PREFIX` key,
so it is never read as a lease)::

    leaseKey (S)  landingDigest (S)  landingSettings (S)  landingWorker (S)
    landingWrittenMs (N)

Written only conditionally: where there is none, or over the digest the writer read.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from consumer.aws import error_code
from consumer.leases.dynamo_table import DynamoTable, aws_errors
from consumer.leases.model import LandingRecord, landing_key
from consumer.leases.store import TableMissingError


class DynamoLanding(DynamoTable):
    """The landing records of a lease table on DynamoDB."""

    @aws_errors
    async def read_landing(self, stream: str, *, consistent: bool = True) -> LandingRecord | None:
        """GetItem of the stream's record."""
        try:
            response = await self._client.get_item(
                TableName=self._table,
                Key={"leaseKey": {"S": landing_key(stream)}},
                ConsistentRead=consistent,
            )
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise TableMissingError(self._table) from None
            raise
        item = response.get("Item")
        if item is None or "landingDigest" not in item:
            return None
        return LandingRecord(
            digest=item["landingDigest"]["S"],
            settings=item.get("landingSettings", {}).get("S", ""),
            worker=item.get("landingWorker", {}).get("S", "?"),
            written_ms=int(item.get("landingWrittenMs", {}).get("N", "0")),
        )

    @aws_errors
    async def record_landing(
        self, stream: str, record: LandingRecord, *, replacing: str | None
    ) -> bool:
        """PutItem where there is no record (``replacing`` None) or over the record with
        digest ``replacing``; False when the record is otherwise by now."""
        condition: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(leaseKey)"}
            if replacing is None
            else {
                "ConditionExpression": "landingDigest = :was",
                "ExpressionAttributeValues": {":was": {"S": replacing}},
            }
        )
        try:
            await self._client.put_item(
                TableName=self._table,
                Item={
                    "leaseKey": {"S": landing_key(stream)},
                    "landingDigest": {"S": record.digest},
                    "landingSettings": {"S": record.settings},
                    "landingWorker": {"S": record.worker},
                    "landingWrittenMs": {"N": str(record.written_ms)},
                },
                **condition,
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                return False
            if code == "ResourceNotFoundException":
                raise TableMissingError(self._table) from None
            raise
        return True
