"""Each stream's landing record, on the in-memory fake and on DynamoDB over HTTP:
written only where there is none or over the digest the writer read, never read as a
lease, and gone with its table."""

from __future__ import annotations

import asyncio

import pytest

from consumer.leases.model import LandingRecord
from consumer.leases.store import TableMissingError
from consumer.sequence import Sentinel
from tests.leases.conftest import Table


def _record(digest: str, worker: str = "w-a") -> LandingRecord:
    return LandingRecord(digest, f'{{"digest":"{digest}"}}', worker, 1_700_000_000_000)


async def test_a_record_is_written_once_then_only_over_what_was_read(table: Table) -> None:
    store = table.store
    assert await store.read_landing("orders") is None
    assert await store.record_landing("orders", _record("aaaaaaaaaaaa"), replacing=None)
    assert await store.read_landing("orders") == _record("aaaaaaaaaaaa")
    # A second first write, and a replacement of a digest that is not there, are refused.
    assert not await store.record_landing("orders", _record("bbbbbbbbbbbb"), replacing=None)
    assert not await store.record_landing(
        "orders", _record("bbbbbbbbbbbb"), replacing="cccccccccccc"
    )
    assert (await store.read_landing("orders")) == _record("aaaaaaaaaaaa")
    new = _record("bbbbbbbbbbbb", "w-b")
    assert await store.record_landing("orders", new, replacing="aaaaaaaaaaaa")
    assert await store.read_landing("orders", consistent=False) in (new, _record("aaaaaaaaaaaa"))
    assert await store.read_landing("orders") == new
    assert await store.read_landing("clicks") is None  # one record per stream


async def test_racing_first_writes_leave_one_record(table: Table) -> None:
    store = table.store
    writes = [
        store.record_landing("orders", _record(f"{i:012x}", f"w-{i}"), replacing=None)
        for i in range(6)
    ]
    won = await asyncio.gather(*writes)
    assert sum(won) == 1
    record = await store.read_landing("orders")
    assert record is not None
    assert record.digest == f"{won.index(True):012x}"


async def test_records_are_not_leases(table: Table) -> None:
    store = table.store
    await store.create_lease("shardId-000000000000", frozenset(), Sentinel.TRIM_HORIZON)
    await store.record_landing("orders", _record("aaaaaaaaaaaa"), replacing=None)
    assert [lease.key for lease in await store.list_leases()] == ["shardId-000000000000"]
    assert await store.owned_by("w-a") == []


async def test_a_missing_table_is_said(table: Table) -> None:
    store = table.store
    await table.drop()
    with pytest.raises(TableMissingError):
        await store.read_landing("orders")
    with pytest.raises(TableMissingError):
        await store.record_landing("orders", _record("aaaaaaaaaaaa"), replacing=None)
