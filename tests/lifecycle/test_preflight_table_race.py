"""Start-up's check of the lease table when the table is deleted under it.

A worker starting while an operator (or a test) deletes the lease table made the table,
then found it gone when it listed the leases, and died with "does not exist ... and
LANDER_LEASE_TABLE_CREATE is false", which was not so (a CI run of the deleted-table
test, 1 in 27 here). A worker allowed to make the table makes it again, as running
workers do; one that is not says so.
"""

from __future__ import annotations

import pytest

from consumer.leases.memory import MemoryLeaseStore
from consumer.leases.model import Lease
from consumer.lifecycle.preflight import PreflightError, Target, preflight
from consumer.stream.memory import MemoryStream

TARGET = Target("orders", "http://kinesis", "leases", "http://dynamodb", None)


class DeletedWhileListed(MemoryLeaseStore):
    """The table is deleted just before each of the first ``times`` listings."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    async def list_leases(self, *, consistent: bool = True) -> list[Lease]:
        if self.times > 0:
            self.times -= 1
            self.drop_table()
        return await super().list_leases(consistent=consistent)


async def test_a_table_deleted_after_it_was_made_is_made_again() -> None:
    store = DeletedWhileListed(times=2)
    passed = await preflight(TARGET, MemoryStream(2), store, None, create_table=True)
    assert passed.shards == 2
    assert await store.table_exists()


async def test_a_table_deleted_every_time_is_said_so_in_one_line() -> None:
    store = DeletedWhileListed(times=10)
    with pytest.raises(PreflightError, match="leases was deleted each time it was made"):
        await preflight(TARGET, MemoryStream(2), store, None, create_table=True)


async def test_without_leave_to_make_it_a_missing_table_is_named() -> None:
    store = MemoryLeaseStore()
    with pytest.raises(PreflightError, match="LANDER_LEASE_TABLE_CREATE is false"):
        await preflight(TARGET, MemoryStream(2), store, None, create_table=False)
