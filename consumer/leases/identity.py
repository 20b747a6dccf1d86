"""One live process per worker id: the id itself is held like a lease.

Two processes under one worker id defeat the lease protocol: each takes the other's
leases as its own ("the table says I own it"), checkpoints stall and nothing says why.
So a worker first claims its id, with the same conditional writes and the same expiry
rule as a shard lease (a counter that stands still for the failover time on the
observer's monotonic clock), held by a token drawn at process start. The claim is the
worker's board slot (:func:`join_board`, decided by
:func:`consumer.leases.board.claim_slot`; the beat is its counter).

- Free (a graceful stop released it), missing, fenced or its own: take it at once.
- Held by another process whose counter moves: another live process runs under this
  id; refuse to start (:class:`DuplicateWorkerError`).
- Held by another process whose counter stands still for the failover time: a
  previous process of this id died; take it over.
- Later, a beat refused because the claim changed hands: this process was
  paused past the failover time and a newer one runs under its id; stop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from consumer.errors import RefusedError
from consumer.leases.board import Slot, claim_slot
from consumer.leases.decisions import Seen
from consumer.leases.store import BoardStore, SlotLostError

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


async def join_board(
    board_store: BoardStore,
    worker_id: str,
    instance: str,
    failover: float,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    address: str | None = None,
) -> Slot:
    """Take this worker id's slot for the process ``instance`` (woken at ``address``,
    :mod:`.wake`): at once if it is free, fenced or this process's own, after watching
    another process's slot stand still for the failover time; raise
    :class:`DuplicateWorkerError` if that one beats."""
    first: Seen | None = None
    while True:
        slot = await board_store.read_slot(worker_id)
        decision = claim_slot(slot, instance, first, clock(), failover)
        if decision == "duplicate":
            raise DuplicateWorkerError(worker_id, "its slot in the workers table beats")
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
                "worker id's slot held by another process; waiting to see whether it is alive",
                worker_id=worker_id,
                up_to_seconds=failover,
            )
        await sleep(min(0.5, failover / 6))
