"""One live process per worker id: the id itself is held like a lease.

Two processes under one worker id defeat the lease protocol: each takes the other's
leases as its own ("the table says I own it"), checkpoints stall and nothing says why.
So a worker first claims its id, with the same conditional writes and the same expiry
rule as a shard lease (a counter that stands still for the failover time on the
observer's monotonic clock), held by a token drawn at process start. Under board
coordination the claim is the worker's board slot (:func:`join_board`, decided by
:func:`consumer.leases.board.claim_slot`; the beat is its counter). Under scan
coordination it is an item ``lander-worker:<id>`` in the lease table, renewed with the
worker's heartbeats (:class:`WorkerClaim`).

- Free (a graceful stop released it), missing, fenced or its own: take it at once.
- Held by another process whose counter moves: another live process runs under this
  id; refuse to start (:class:`DuplicateWorkerError`).
- Held by another process whose counter stands still for the failover time: a
  previous process of this id died; take it over.
- Later, a renewal (or beat) refused because the claim changed hands: this process was
  paused past the failover time and a newer one runs under its id; stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable

import structlog

from consumer.errors import RefusedError
from consumer.leases.board import Board, claim_slot
from consumer.leases.decisions import Seen, is_expired, observe
from consumer.leases.model import WORKER_KEY_PREFIX, Lease, LeaseLostError
from consumer.leases.store import BoardStore, LeaseStore, SlotLostError
from consumer.sequence import Sentinel

log = structlog.get_logger("consumer.leases")


class DuplicateWorkerError(RefusedError):
    """Another live process heartbeats under this worker id. Not retriable."""

    retriable = False

    def __init__(self, worker_id: str, detail: str) -> None:
        super().__init__(
            f"another process is running as worker id {worker_id!r} ({detail}); give each "
            "process its own LANDER_WORKER_ID, or leave it unset for a unique default"
        )
        self.worker_id = worker_id


class WorkerClaim:
    """This process's hold on its worker id."""

    def __init__(
        self,
        store: LeaseStore,
        worker_id: str,
        failover: float,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        token: str | None = None,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.key = WORKER_KEY_PREFIX + worker_id
        self.failover = failover
        self.token = token or uuid.uuid4().hex
        """Names this process start; the claim's owner while it holds the id."""
        # Looked up now, not at import: a simulation's clock (bench/virtual_time.py) holds.
        self.clock = clock or time.monotonic
        self.sleep = sleep
        self.lease: Lease | None = None

    async def acquire(self) -> None:
        """Hold the id, waiting out a dead predecessor; raise if another process lives."""
        seen: dict[str, Seen] = {}
        first: Seen | None = None
        waiting_logged = False
        while True:
            current = await self.store.get_lease(self.key)
            if current is None:
                await self.store.create_lease(self.key, frozenset(), Sentinel.TRIM_HORIZON)
                continue
            now = self.clock()
            seen = observe(seen, [current], now)
            if current.owner in (None, self.token) or is_expired(current, seen, now, self.failover):
                try:
                    self.lease = await self.store.take(current, self.token)
                except LeaseLostError:
                    continue  # it changed under us: look again
                log.info("worker id claimed", worker_id=self.worker_id, instance=self.token)
                return
            if first is None:
                first = seen[self.key]
            elif seen[self.key].counter != first.counter:
                raise DuplicateWorkerError(self.worker_id, f"its claim {self.key} is being renewed")
            if not waiting_logged:
                log.info(
                    "worker id held by another process; waiting to see whether it is alive",
                    worker_id=self.worker_id,
                    up_to_seconds=self.failover,
                )
                waiting_logged = True
            await self.sleep(min(0.5, self.failover / 6))

    async def renew(self) -> None:
        """Heartbeat the claim; raise DuplicateWorkerError if another process took it."""
        if self.lease is None:
            return
        try:
            self.lease = await self.store.renew(self.lease)
        except LeaseLostError:
            current = await self.store.get_lease(self.key)
            if current is not None and current.owner not in (None, self.token):
                raise DuplicateWorkerError(
                    self.worker_id, "it took this process's claim while this one was paused"
                ) from None
            # Deleted with the table, or released: claim it again.
            self.lease = None
            await self._reclaim()

    async def _reclaim(self) -> None:
        await self.store.create_lease(self.key, frozenset(), Sentinel.TRIM_HORIZON)
        current = await self.store.get_lease(self.key)
        if current is not None and current.owner in (None, self.token):
            self.lease = await self.store.take(current, self.token)

    async def release(self) -> None:
        """Give the id up (a graceful stop), so a restart under it starts at once."""
        if self.lease is None:
            return
        with contextlib.suppress(LeaseLostError):
            await self.store.release(self.lease)
        self.lease = None


async def join_board(
    board_store: BoardStore,
    worker_id: str,
    instance: str,
    failover: float,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    address: str | None = None,
) -> Board:
    """Take this worker id's slot for the process ``instance`` (woken at ``address``,
    :mod:`.wake`): at once if it is free, fenced or this process's own, after watching
    another process's slot stand still for the failover time; raise
    :class:`DuplicateWorkerError` if that one beats."""
    first: Seen | None = None
    while True:
        board = await board_store.read_board()
        slot = board.slots.get(worker_id)
        decision = claim_slot(slot, instance, first, clock(), failover)
        if decision == "duplicate":
            raise DuplicateWorkerError(worker_id, "its slot on the lease table's board beats")
        if decision == "join":
            expect = None if slot is None else slot.counter
            try:
                return await board_store.join(worker_id, instance, expect=expect, address=address)
            except SlotLostError:
                first = None  # it changed under us: look again
                continue
        if first is None:
            assert slot is not None
            first = Seen(slot.counter, clock())
            log.info(
                "worker id's board slot held by another process; waiting to see whether it "
                "is alive",
                worker_id=worker_id,
                up_to_seconds=failover,
            )
        await sleep(min(0.5, failover / 6))
