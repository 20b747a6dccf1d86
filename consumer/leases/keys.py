"""Lease keys that carry their stream: KCL's multi-stream mode.

A fleet that consumes several streams keys each lease the way KCL's multi-stream mode
does (KCL 2.3+: ``StreamIdentifier`` and ``MultiStreamLease``):
``account:stream:creationEpoch:shardId``, with the stream part also stored in the
item's ``streamName`` attribute, the shard id in ``shardId``, and the parents in
``parentShardId`` as shard ids. The creation epoch tells a stream deleted and created
again under the same name from the one before it, whose leases must not be resumed.
A single-stream table keeps plain shard ids as keys (shard ids hold no ``:``).

Inside the lander a lease's parents are always lease keys; only the table's items
name them by shard id (:func:`stream_attributes`, :func:`parents_of_item`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumer.leases.model import RESERVED_PREFIX

if TYPE_CHECKING:
    from consumer.leases.model import Lease

ARN = re.compile(
    r"^arn:aws[a-z-]*:kinesis:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"stream/(?P<name>[A-Za-z0-9_.-]{1,128})$"
)
"""A Kinesis stream's ARN."""
_SERIALIZED = re.compile(r"^(?P<account>\d+):(?P<name>[A-Za-z0-9_.-]{1,128}):(?P<created>\d+)$")


@dataclass(frozen=True, slots=True, order=True)
class StreamId:
    """One stream as the lease table names it: account, name, creation (epoch seconds)."""

    account: str
    name: str
    created: int

    @property
    def serialized(self) -> str:
        """``account:name:creationEpoch``, KCL's ``StreamIdentifier.serialize()``."""
        return f"{self.account}:{self.name}:{self.created}"

    @classmethod
    def parse(cls, text: str) -> StreamId:
        """The inverse of :attr:`serialized`; ValueError for anything else."""
        match = _SERIALIZED.match(text)
        if match is None:
            raise ValueError(f"not a stream identifier (account:name:creationEpoch): {text!r}")
        return cls(match["account"], match["name"], int(match["created"]))

    @classmethod
    def of(cls, arn: str, created: datetime) -> StreamId:
        """From a stream's ARN and creation time (ListStreams' summaries give both)."""
        match = ARN.match(arn)
        if match is None:
            raise ValueError(f"not a Kinesis stream ARN: {arn!r}")
        return cls(match["account"], match["name"], int(created.timestamp()))


def lease_key(stream: StreamId | None, shard_id: str) -> str:
    """The lease key of a shard: its id alone in a single-stream table."""
    return shard_id if stream is None else f"{stream.serialized}:{shard_id}"


def split_key(key: str) -> tuple[StreamId | None, str]:
    """The stream (None: a single-stream key) and shard id of a lease key."""
    account, sep, rest = key.partition(":")
    if not sep:
        return None, key
    name, _, rest = rest.partition(":")
    created, _, shard_id = rest.partition(":")
    if not shard_id:
        raise ValueError(f"not a lease key (shardId or account:stream:epoch:shardId): {key!r}")
    return StreamId.parse(f"{account}:{name}:{created}"), shard_id


def stream_attributes(key: str, parents: Set[str]) -> dict[str, Any]:
    """A new lease item's stream and parent attributes, as KCL writes them: the stream
    in ``streamName``, the shard in ``shardId`` and the parents by shard id (a
    single-stream lease has only ``parentShardId``; the lander's own items, such as
    ``lander-worker:<id>``, neither)."""
    stream, shard_id = (None, key) if key.startswith(RESERVED_PREFIX) else split_key(key)
    item: dict[str, Any] = {}
    if stream is not None:
        item["streamName"] = {"S": stream.serialized}
        item["shardId"] = {"S": shard_id}
    if parents:
        item["parentShardId"] = {"SS": sorted(split_key(p)[1] for p in parents)}
    return item


def parents_of_item(item: Mapping[str, Any]) -> frozenset[str]:
    """A lease item's parents as lease keys (a multi-stream item names them by shard id)."""
    parents: list[str] = item.get("parentShardId", {}).get("SS", [])
    stream = item.get("streamName", {}).get("S")
    if stream is None:
        return frozenset(parents)
    sid = StreamId.parse(stream)
    return frozenset(lease_key(sid, p) for p in parents)


def stream_groups(leases: Iterable[Lease]) -> dict[StreamId | None, list[Lease]]:
    """A table's leases by stream (None: a single-stream table's), by stream name."""
    groups: dict[StreamId | None, list[Lease]] = {}
    for lease in leases:
        try:
            stream = split_key(lease.key)[0]
        except ValueError:
            stream = None
        groups.setdefault(stream, []).append(lease)
    return dict(sorted(groups.items(), key=lambda item: (item[0] is not None, item[0])))
