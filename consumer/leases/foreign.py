"""A worker refuses to start beside another application that renews leases in its table.

Lander workers renew no lease: a lease is held while its owner's board slot beats, and
the leader treats a lease whose owner is not on the board as free once its counter has
stood still for the failover time (:func:`consumer.leases.board.free_lease`). That is
how a table left by a KCL application, or by an earlier lander release, is adopted. An
application that is still running there renews its leases, so their counters move, and
the two would read the same shards. So at start a worker looks at the leases owned by
workers that are not on the board: if one's counter moves within the failover time, it
refuses (exit 3) and says which. Leases left by stopped workers stand still, and the
worker adopts them once the failover time has passed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from consumer.errors import RefusedError
from consumer.leases.store import CoordinatedStore

POLLS = 6


class ForeignWorkersError(RefusedError):
    """Another application renews leases in the lease table. Not retriable."""

    retriable = False


async def _moving(
    read: Callable[[], Awaitable[dict[str, int]]],
    failover: float,
    sleep: Callable[[float], Awaitable[None]],
) -> list[str]:
    """Names whose counter changes within ``failover`` seconds (read POLLS + 1 times)."""
    first = await read()
    if not first:
        return []
    for _ in range(POLLS):
        await sleep(failover / POLLS)
        now = await read()
        moved = sorted(name for name, counter in now.items() if first.get(name, counter) != counter)
        if moved:
            return moved
    return []


async def _strangers(store: CoordinatedStore) -> dict[str, int]:
    """Leases held by owners that have no slot in the workers table, with their counters."""
    board = await store.read_board()
    leases = await store.list_leases()
    return {
        f"{lease.owner} ({lease.key})": lease.counter
        for lease in leases
        if lease.owner is not None and lease.owner not in board.slots and not lease.finished
    }


async def refuse_strangers(
    store: CoordinatedStore,
    table: str,
    failover: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Raise :class:`ForeignWorkersError` if leases of owners not on the board are
    renewed within ``failover`` seconds (a KCL application or an earlier lander release
    runs on the table)."""
    moving = await _moving(lambda: _strangers(store), failover, sleep)
    if moving:
        raise ForeignWorkersError(
            f"lease table {table} is in use by workers that renew their leases (a KCL "
            f"application or an earlier lander release: {', '.join(moving[:3])}); stop "
            "them first, then start this fleet (docs/operations.md, Upgrading from a "
            "release with scan coordination)"
        )
