"""One coordination mode per lease table: a worker refuses to start beside live workers
of the other mode.

The modes cannot share a table. Scan workers renew every lease they hold and judge a
lease whose counter stands still as expired, so they would take a board worker's
leases (board workers renew none) while it still reads them; and the board's leader
leaves a lease alone while its owner, not on the board, keeps renewing it. So at start:

- a **scan** worker looks at the board: if a slot's counter moves within the failover
  time, board workers are running, and it refuses;
- a **board** worker looks at the leases owned by workers that are not on the board: if
  one's counter moves within the failover time, scan workers (or a KCL application)
  are running, and it refuses.

Slots and leases left by stopped workers stand still, so a switch is: stop the fleet,
start it in the other mode (the new workers wait out the failover time once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from consumer.errors import RefusedError
from consumer.leases.store import CoordinatedStore

POLLS = 6


class MixedCoordinationError(RefusedError):
    """Live workers of the other coordination mode share the lease table. Not retriable."""

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


async def refuse_board_workers(
    store: CoordinatedStore,
    table: str,
    failover: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """For a scan worker: raise if workers beat on the table's board."""

    async def slots() -> dict[str, int]:
        board = await store.read_board()
        return {w: s.counter for w, s in board.slots.items() if not s.fenced}

    moving = await _moving(slots, failover, sleep)
    if moving:
        raise MixedCoordinationError(
            f"lease table {table} is shared by workers under board coordination "
            f"({', '.join(moving[:3])}); set LANDER_COORDINATION=board, or stop them first"
        )


async def refuse_scan_workers(
    store: CoordinatedStore,
    table: str,
    failover: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """For a board worker: raise if leases are renewed by owners not on the board."""

    async def strangers() -> dict[str, int]:
        board = await store.read_board()
        leases = await store.list_leases()
        return {
            f"{lease.owner} ({lease.key})": lease.counter
            for lease in leases
            if lease.owner is not None and lease.owner not in board.slots and not lease.finished
        }

    moving = await _moving(strangers, failover, sleep)
    if moving:
        raise MixedCoordinationError(
            f"lease table {table} is shared by workers that renew their leases (scan "
            f"coordination or a KCL application: {', '.join(moving[:3])}); set "
            "LANDER_COORDINATION=scan, or stop them first"
        )
