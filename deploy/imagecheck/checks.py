"""What the image check looks at, read from the host independently of the images.

The stream is read from its start on every shard and de-aggregated, so the check knows
every user record's place without trusting the producer's own account; the archive is
copied out of S3 into a folder and read with :mod:`consumer.archive.reader`; the lease
table is scanned. The comparisons are pure functions (tests/deploy/test_image_check.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import botocore.session
from botocore.config import Config

from consumer.cli.harness import wait_until
from consumer.cli.reconcile import ArchiveView, read_archive
from consumer.leases.dynamo import is_lease, lease_from_item
from consumer.leases.model import Lease
from consumer.sequence import Position
from consumer.stream.kpl import deaggregate, is_aggregated
from sparkjobs.catalog import table_ref
from sparkjobs.table.table import open_table

from .engine import CheckError

Place = tuple[str, str, int]
T = TypeVar("T")


def client(service: str, endpoint: str) -> Any:
    """A plain botocore client for the local stack (dummy credentials, no retries)."""
    return botocore.session.get_session().create_client(
        service,
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="lander-local",
        aws_secret_access_key="lander-local",
        config=Config(connect_timeout=2, read_timeout=20, retries={"max_attempts": 2}),
    )


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, step: float = 1.0) -> T:
    """Poll ``probe`` until it answers (the harness's :func:`wait_until`); a timeout is a
    :class:`CheckError`."""
    try:
        found: T = wait_until(probe, timeout, what, step)
    except AssertionError as exc:
        raise CheckError(str(exc)) from None
    return found


def stream_records(kinesis: Any, stream: str) -> dict[Place, bytes]:
    """Every user record in the stream by place, from the start of every shard."""
    records: dict[Place, bytes] = {}
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    for shard in shards:
        shard_id = shard["ShardId"]
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            for record in page["Records"]:
                data = record["Data"]
                sequence = record["SequenceNumber"]
                if is_aggregated(data):
                    for index, user in enumerate(deaggregate(data)):
                        records[(shard_id, sequence, index)] = user.data
                else:
                    records[(shard_id, sequence, 0)] = data
            if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                break
            iterator = page.get("NextShardIterator")
    return records


def mirror_archive(s3: Any, archive: str, dest: Path) -> Path:
    """Copy every object under ``s3://bucket/prefix`` to ``dest``, keys relative to the
    prefix, so ``dest`` reads as a file archive. Returns ``dest``."""
    bucket, _, prefix = archive.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    dest.mkdir(parents=True, exist_ok=True)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            target = dest / item["Key"][len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
    return dest


def archive_view(s3: Any, archive: str, dest: Path, stream: str) -> ArchiveView:
    """The archive as it stands in S3 now, read through a fresh copy at ``dest``."""
    if dest.exists():
        for path in sorted(dest.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    return read_archive(mirror_archive(s3, archive, dest), stream)


@dataclass(frozen=True, slots=True)
class Landing:
    """How the archive compares with the stream, position by position."""

    records: int
    landed: int
    dead: int
    missing: int
    extra: int
    copies: int

    @property
    def exact(self) -> bool:
        """Every record in the stream landed or dead-lettered once, nothing else."""
        return self.missing == self.extra == self.copies == 0 and self.records > 0

    def line(self) -> str:
        """One line for the log."""
        return (
            f"stream {self.records} records; landed {self.landed}, dead letters {self.dead}; "
            f"missing {self.missing}, not in the stream {self.extra}, extra copies {self.copies}"
        )


def compare(stream: Iterable[Place], landed: Counter[Place], dead: Counter[Place]) -> Landing:
    """The archive (landed and dead-lettered places with their copy counts) against the
    places in the stream."""
    expected = set(stream)
    found = landed + dead
    return Landing(
        records=len(expected),
        landed=sum(landed.values()),
        dead=sum(dead.values()),
        missing=len(expected - found.keys()),
        extra=len(found.keys() - expected),
        copies=sum(n - 1 for n in found.values() if n > 1),
    )


def event_ids(records: Mapping[Place, bytes], pointer: str = "event_id") -> set[str]:
    """The distinct event ids of the JSON records (the rest are dead letters)."""
    ids: set[str] = set()
    for data in records.values():
        try:
            document = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(document, dict) and pointer in document:
            ids.add(str(document[pointer]))
    return ids


def leases(dynamodb: Any, table: str) -> list[Lease]:
    """Every shard lease in the table (consistent scan)."""
    found: list[Lease] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        found.extend(lease_from_item(i) for i in page.get("Items", []) if is_lease(i))
        if not page.get("LastEvaluatedKey"):
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def released_at_end(found: list[Lease], records: Iterable[Place]) -> list[str]:
    """Problems with the leases after every worker stopped: each shard's lease must have
    no owner and a checkpoint at the last record the stream holds for it."""
    last: dict[str, Position] = {}
    for shard, sequence, sub in records:
        here = Position(int(sequence), sub)
        last[shard] = max(last.get(shard, here), here)
    problems: list[str] = []
    for lease in sorted(found, key=lambda lease: lease.key):
        if lease.owner is not None:
            problems.append(f"{lease.key} still owned by {lease.owner}")
        want = last.get(lease.key)
        if want is not None and lease.checkpoint != want:
            problems.append(f"{lease.key} checkpoint {lease.checkpoint}, last record {want}")
    return problems


def compacted_once(
    compacted: str, stream: str, ids: set[str], what: str, prints: Callable[[str], object]
) -> None:
    """The compacted table under ``compacted`` holds one row per event id in ``ids``,
    and no other; raises :class:`CheckError` saying how it differs."""
    table = open_table(table_ref(compacted, stream), create=False)
    if table is None:
        raise CheckError(f"{what}: no compacted table under {compacted}")
    rows = table.scan(selected_fields=("event_id",)).to_arrow().column("event_id").to_pylist()
    found = set(rows)
    if len(rows) != len(found) or found != ids:
        raise CheckError(
            f"{what}: {len(rows)} rows, {len(found)} event ids; the stream holds {len(ids)} "
            f"(missing {len(ids - found)}, unexpected {len(found - ids)})"
        )
    prints(f"{what}: the table has {len(rows)} rows, one per event id in the stream")
