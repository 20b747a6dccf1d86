"""Effects on groups of records (consumer.effects.groups), on the in-memory fake and on
DynamoDB: groups cut the same whatever the deliveries' sizes, a group cut short cut
the same again after a crash, a group waiting for the rest of its records, and one
effect per group."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from consumer.effects import Effects, Mode
from consumer.effects.groups import ShardGroups
from consumer.sequence import Position
from consumer.stream.records import Record
from tests.effects.conftest import Bench

NOW = 1_800_000_000.0
ARRIVAL = datetime(2026, 11, 29, tzinfo=UTC)
RECORDS = [
    Record("shardId-000000000000", Position(1000 + 7 * i), "pk", f'{{"n": {i}}}'.encode(), ARRIVAL)
    for i in range(300)
]


class Bulk:
    """A downstream taking groups: each call's key and records, by number."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []
        self.crash_on: int | None = None

    async def __call__(self, key: str, records: list[Record]) -> dict[str, int]:
        numbers = [int(r.data.decode().split(": ")[1].rstrip("}")) for r in records]
        self.calls.append((key, numbers))
        if self.crash_on is not None and len(self.calls) == self.crash_on:
            raise asyncio.CancelledError  # the process dies in the middle of the call
        return {"rows": len(records)}


def _effects(bench: Bench) -> Effects:
    return Effects(bench.effects, ttl_seconds=3600, clock=lambda: NOW)


def _spans(bulk: Bulk) -> list[tuple[int, int]]:
    return [(numbers[0], numbers[-1]) for _, numbers in bulk.calls]


async def _deliver(
    groups: ShardGroups, held: Any, bulk: Bulk, sizes: list[int], start: int = 0
) -> None:
    at = start
    for size in sizes:
        await groups.add(held, RECORDS[at : at + size], bulk)
        at += size


async def test_groups_do_not_depend_on_how_records_were_delivered(bench: Bench) -> None:
    held, bulk = await bench.hold("w1"), Bulk()
    groups = ShardGroups(_effects(bench).shard(), size=100)
    await _deliver(groups, held, bulk, [7, 50, 120, 73])
    assert _spans(bulk) == [(0, 99), (100, 199)]
    await groups.flush(held, bulk)
    assert _spans(bulk) == [(0, 99), (100, 199), (200, 249)]
    assert held.checkpoints == [RECORDS[99].position, RECORDS[199].position, RECORDS[249].position]
    assert bulk.calls[0][0] == f"shardId-000000000000@{RECORDS[0].position.sequence}"


@pytest.mark.parametrize("mode", list(Mode))
async def test_a_group_cut_short_is_cut_the_same_after_a_crash(bench: Bench, mode: Mode) -> None:
    """A flush cuts 200..249 and the process dies in its effect. The next holder gets
    200..279 in one delivery and still runs 200..249 (keyed: again, under the same key;
    at most once: not at all, unknown), then 250.. as groups of its own."""
    held, bulk = await bench.hold("w1"), Bulk()
    effects = _effects(bench)
    first = ShardGroups(effects.shard(), size=100)
    await _deliver(first, held, bulk, [250])
    bulk.crash_on = 3
    with pytest.raises(asyncio.CancelledError):
        await first.flush(held, bulk, mode=mode)
    bulk.crash_on = None
    owner = await bench.hold("w2")  # from the checkpoint after 199
    second = ShardGroups(effects.shard(), size=100)
    outcomes = await second.add(owner, RECORDS[200:280], bulk, mode=mode)
    assert [o.status for o in outcomes] == (["done"] if mode is Mode.KEYED else ["unknown"])
    assert _spans(bulk)[2:] == ([(200, 249), (200, 249)] if mode is Mode.KEYED else [(200, 249)])
    assert owner.checkpoints == [RECORDS[249].position]
    await second.add(owner, RECORDS[280:300], bulk, mode=mode)
    await second.flush(owner, bulk, mode=mode)
    assert _spans(bulk)[-1] == (250, 299)


async def test_a_group_waits_for_the_rest_of_its_records(bench: Bench) -> None:
    """A shorter delivery than the group cut before: nothing runs, nothing is
    checkpointed, until the group's last record has arrived; and it runs once."""
    held, bulk = await bench.hold("w1"), Bulk()
    effects = _effects(bench)
    first = ShardGroups(effects.shard(), size=100)
    await _deliver(first, held, bulk, [100])
    bulk.crash_on = None
    # Another run of the shard from the start (the checkpoint's write was lost, say).
    again = ShardGroups(effects.shard(), size=10)  # even with another size
    assert await again.add(held, RECORDS[0:40], bulk) == []
    assert await again.flush(held, bulk) == []  # a flush cannot cut a group shorter
    outcomes = await again.add(held, RECORDS[40:120], bulk)
    assert [o.status for o in outcomes] == ["repeat", "done", "done"]
    assert _spans(bulk) == [(0, 99), (100, 109), (110, 119)]


def test_a_group_holds_at_least_one_record() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        ShardGroups(None, size=0)  # type: ignore[arg-type]
