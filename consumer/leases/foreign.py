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

The default, ``auto`` (:func:`choose_coordination`), follows the table: a worker joins
the mode of the live workers it finds, and takes board coordination on a table where
none run. So an upgrade rolled over a scan fleet (the only mode before board
coordination existed) stays in scan mode instead of stalling on the refusal above,
and says how to switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

import structlog

from consumer.errors import RefusedError
from consumer.leases.store import CoordinatedStore

log = structlog.get_logger("consumer.leases")

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


async def _slots(store: CoordinatedStore) -> dict[str, int]:
    """Unfenced board slots and their counters."""
    board = await store.read_board()
    return {w: s.counter for w, s in board.slots.items() if not s.fenced}


async def _strangers(store: CoordinatedStore) -> dict[str, int]:
    """Leases held by owners that are not on the board, with their counters."""
    board = await store.read_board()
    leases = await store.list_leases()
    return {
        f"{lease.owner} ({lease.key})": lease.counter
        for lease in leases
        if lease.owner is not None and lease.owner not in board.slots and not lease.finished
    }


def _board_workers_error(table: str, moving: list[str]) -> MixedCoordinationError:
    return MixedCoordinationError(
        f"lease table {table} is shared by workers under board coordination "
        f"({', '.join(moving[:3])}); set LANDER_COORDINATION=board, or stop them first"
    )


def _scan_workers_error(table: str, moving: list[str]) -> MixedCoordinationError:
    return MixedCoordinationError(
        f"lease table {table} is shared by workers that renew their leases (scan "
        f"coordination or a KCL application: {', '.join(moving[:3])}); set "
        "LANDER_COORDINATION=scan, or stop them first"
    )


async def refuse_other_mode(
    mode: Literal["scan", "board"],
    store: CoordinatedStore,
    table: str,
    failover: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """For a worker of an explicit ``mode``: raise if workers of the other mode are
    live on the table (a scan worker looks for beating slots, a board worker for
    leases renewed by owners not on the board)."""
    if mode == "scan":
        moving = await _moving(lambda: _slots(store), failover, sleep)
        if moving:
            raise _board_workers_error(table, moving)
    else:
        moving = await _moving(lambda: _strangers(store), failover, sleep)
        if moving:
            raise _scan_workers_error(table, moving)


async def choose_coordination(
    store: CoordinatedStore,
    table: str,
    failover: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Literal["scan", "board"]:
    """``LANDER_COORDINATION=auto``: the mode of the live workers on the table; board
    where none run. Watches slots and foreign leases together, up to the failover time
    when some exist and stand still (stopped workers left them)."""

    async def both() -> dict[str, int]:
        slots = {f"board {w}": c for w, c in (await _slots(store)).items()}
        return slots | {f"lease {k}": c for k, c in (await _strangers(store)).items()}

    moving = await _moving(both, failover, sleep)
    board = [name.removeprefix("board ") for name in moving if name.startswith("board ")]
    scan = [name.removeprefix("lease ") for name in moving if name.startswith("lease ")]
    if board and scan:
        raise _board_workers_error(table, board)  # both at once: refuse, name one side
    if scan:
        log.warning(
            "live workers renew their leases on this table (scan coordination, or KCL): "
            "following them in scan coordination. To move the fleet to board coordination "
            "(read cost flat in the number of workers), stop every worker once and start "
            "them again (docs/operations.md, Switching coordination)",
            lease_table=table,
            seen=scan[:3],
        )
        return "scan"
    return "board"
