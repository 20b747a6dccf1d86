"""One worker's slot in the workers table (:mod:`.board`): its claim on the worker id,
its beats, and the acting window each beat opens.

A beat is a conditional write on the slot's counter that returns the slot: the leases
given or handed to the worker since (``incoming``) and the notices counter. The worker
acts on its leases only within ``stale_after`` of the start of its last successful
beat (:meth:`Heartbeat.fresh`). Beats are serialised (a lock): a beat in flight moves
the counter that the next one, and the slot's removal, are conditioned on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from consumer.leases.board import Slot
from consumer.leases.identity import join_board
from consumer.leases.model import LeaseLostError
from consumer.leases.reports import CpuMeter
from consumer.leases.store import CoordinatedStore, SlotLostError, TableMissingError

log = structlog.get_logger("consumer.leases")


class Heartbeat:
    """This worker's slot as its last beat wrote it, and the beats that keep it."""

    def __init__(
        self,
        store: CoordinatedStore,
        worker_id: str,
        *,
        failover: float,
        stale_after: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        instance: str,
        address: str | None,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._failover = failover
        self._stale_after = stale_after
        self._clock = clock
        self._sleep = sleep
        self._instance = instance
        self._address = address
        self._slot: Slot | None = None
        self._started: float | None = None
        self._handled = 0
        """How many of the slot's incoming keys were handled (the next beat drops them)."""
        self._lock = asyncio.Lock()
        self._cpu = CpuMeter()

    @property
    def slot(self) -> Slot | None:
        """The slot as the last beat (or the join) wrote it; None off the board."""
        return self._slot

    @property
    def address(self) -> str | None:
        """``host:port`` written on the slot at each join (:mod:`.wake`), if any."""
        return self._address

    def advertise(self, address: str | None) -> None:
        """Be woken at ``address`` from the next join on."""
        self._address = address

    def fresh(self) -> bool:
        """Whether the worker is inside its acting window."""
        return (
            self._slot is not None
            and self._started is not None
            and self._clock() - self._started < self._stale_after
        )

    async def join(self) -> Slot:
        """Take a fresh slot under the worker id (:func:`.identity.join_board`), creating
        the tables first if they are missing; the keys already in its incoming list
        count as handled."""
        try:
            started, slot = self._clock(), await self._join()
        except TableMissingError:
            log.warning("lease table missing; creating it", worker_id=self._worker_id)
            await self._store.ensure_table()
            started, slot = self._clock(), await self._join()
        self._slot, self._started, self._handled = slot, started, len(slot.incoming)
        return slot

    async def _join(self) -> Slot:
        return await join_board(
            self._store,
            self._worker_id,
            self._instance,
            self._failover,
            clock=self._clock,
            sleep=self._sleep,
            address=self._address,
        )

    async def beat(self, *, held: int, leaving: bool, unfit: bool = False) -> Slot:
        """One beat, reporting ``held``, ``leaving`` and the process's CPU use, and
        dropping the incoming keys handled since the last. LeaseLostError off the board;
        SlotLostError if the slot was fenced or taken (the worker is off it then)."""
        async with self._lock:
            if self._slot is None:
                raise LeaseLostError("*", "not on the board")
            started = self._clock()
            handled = self._handled
            try:
                slot = await self._store.beat(
                    self._worker_id,
                    self._slot.counter,
                    held=held,
                    leaving=leaving,
                    unfit=unfit,
                    read=handled,
                    cpu=self._cpu.percent(),
                )
            except SlotLostError:
                self.drop()
                raise
            # A beat in between (an ensure_valid's) drops its share and subtracts it.
            self._handled -= handled
            self._slot, self._started = slot, started
            return slot

    def unhandled(self) -> list[str]:
        """The incoming keys not handled yet, in the order they came."""
        return [] if self._slot is None else list(self._slot.incoming[self._handled :])

    def handled(self, count: int) -> None:
        """The first ``count`` unhandled incoming keys were handled: the next beat drops
        them."""
        self._handled += count

    def drop(self) -> None:
        """Off the board: the slot was lost."""
        self._slot, self._started, self._handled = None, None, 0

    async def remove(self) -> bool:
        """Take the slot off the board (the worker leaves), after any beat in flight;
        False if the write was refused (the leader fences the slot in time)."""
        async with self._lock:
            slot, self._slot = self._slot, None
            if slot is None:
                return True
            return await self._store.remove_slot(self._worker_id, counter=slot.counter)
