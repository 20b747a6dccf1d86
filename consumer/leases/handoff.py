"""The two waits of a board hand-off, each on its own task: the receiver polls for the
lease, the owner polls for the receiver's acknowledgement.

A hand-off asked by the leader reaches the receiver and the owner at their next beats,
in either order. The receiver acknowledges (``handoffAck``) and polls the lease; the
owner polls the lease until it sees the acknowledgement and only then stops reading.
So the owner never stops before the receiver is ready, and the gap between the two
readers is one poll, not a beat interval.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from consumer.aio import batched
from consumer.leases.board import Board
from consumer.leases.member import Holder
from consumer.leases.model import Lease, LeaseLostError
from consumer.leases.store import LeaseStore
from consumer.leases.wake import Courier

log = structlog.get_logger("consumer.leases")

POLL_SECONDS = 0.1
"""How often a receiver reads a lease being handed to it."""
ACK_POLL_SECONDS = 0.25
"""How often an owner asked for a hand-off reads the lease for its receiver's ack."""


class Handoffs:
    """One worker's hand-offs in flight: the leases it waits to receive and the ones
    whose receivers' acknowledgements it waits for, each wait a task of its own."""

    def __init__(
        self,
        store: LeaseStore,
        courier: Courier,
        holder: Holder,
        worker_id: str,
        *,
        failover: float,
        renew_interval: float,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._courier = courier
        self._worker_id = worker_id
        self._wait = 2 * failover
        self._nudge = renew_interval
        self._clock = clock
        self._holder = holder
        self._log = log.bind(worker_id=worker_id)
        self._receiving: dict[str, asyncio.Task[None]] = {}
        self._acks: dict[str, asyncio.Task[None]] = {}

    def receiving(self, key: str) -> bool:
        """Whether this worker waits for the lease to be handed to it."""
        return key in self._receiving

    def receive(self, key: str, owner: str | None) -> None:
        """Wait, on a task of its own, for ``owner`` to hand the lease over."""
        if key not in self._receiving:
            self._receiving[key] = asyncio.create_task(self._await_handoff(key, owner))

    def watch_ack(self, key: str) -> None:
        """Wait, on a task of its own, for the receiver of a held lease to acknowledge."""
        if key not in self._acks:
            self._acks[key] = asyncio.create_task(self._await_ack(key))

    async def stop(self) -> None:
        """Cancel every wait (the worker leaves)."""
        tasks = [*self._receiving.values(), *self._acks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _await_handoff(self, key: str, owner: str | None) -> None:
        """Poll a lease being handed to this worker until its owner transfers it."""
        deadline = self._clock() + self._wait
        nudged = self._clock()
        try:
            while self._clock() < deadline:
                await asyncio.sleep(POLL_SECONDS)
                lease = await self._store.get_lease(key)
                if lease is None:
                    return
                if lease.owner == self._worker_id:
                    if not self._holder.holds(key):
                        await self._holder.take_given(lease)  # passed on if leaving meanwhile
                    return
                if lease.handoff_to != self._worker_id:
                    return
                if owner is not None and self._clock() - nudged >= self._nudge:
                    await self._courier.deliver(owner, [key])
                    nudged = self._clock()
        except Exception as exc:  # a lease left where it is is picked up by the leader
            self._log.warning("waiting for a hand-off failed", shard_id=key, error=repr(exc))
        finally:
            self._receiving.pop(key, None)

    async def _await_ack(self, key: str) -> None:
        """Poll a lease the leader asked this worker to hand over until its receiver
        acknowledges (then stop reading it), so the hand-off waits for the receiver's
        beat, not for this worker's next one."""
        deadline = self._clock() + self._wait
        try:
            while self._clock() < deadline and self._holder.holds(key):
                await asyncio.sleep(ACK_POLL_SECONDS)
                lease = await self._store.get_lease(key)
                if lease is None or lease.owner != self._worker_id or lease.handoff_to is None:
                    return
                if lease.handoff_ack == lease.handoff_to:
                    self._holder.notice_handoff(lease)
                    return
        except Exception as exc:  # the next notice looks again
            self._log.warning("waiting for a hand-off ack failed", shard_id=key, error=repr(exc))
        finally:
            self._acks.pop(key, None)

    async def pass_on(self, lease: Lease) -> None:
        """Release a lease given to a worker that is leaving, and tell the leader."""
        try:
            await self._store.release(lease)
        except LeaseLostError:
            return
        self._log.info("lease passed on", shard_id=lease.key, why="leaving")
        await self._holder.notify_leader()

    async def ask_all(self, leases: list[Lease], board: Board, order: list[str]) -> None:
        """Ask for the hand-off of every lease at once (a worker that leaves), each to
        the live worker holding fewest (:func:`receivers_for`), and wake the
        receivers. Each shard stops when its receiver acknowledges. The requests go
        out together: a worker holding fifty leases asked one after another would
        start its last hand-off seconds late."""
        planned = receivers_for(leases, board, order, self._worker_id)
        asked = await batched([self._store.request_handoff(lease, to) for lease, to in planned])
        deliveries: dict[str, list[str]] = {}
        for (lease, to), granted in zip(planned, asked, strict=True):
            if granted:  # refused: someone else's request stands, or the lease moved on
                deliveries.setdefault(to, []).append(lease.key)
                self.watch_ack(lease.key)
        for to, keys in deliveries.items():
            await self._courier.deliver(to, keys)
        self._log.info(
            "leaving: hand-offs asked",
            receivers={to: len(keys) for to, keys in sorted(deliveries.items())},
            held=len(leases),
        )

    async def release_unheld(self) -> None:
        """Withdraw the acknowledgements of hand-offs to this worker not transferred
        yet, then release leases that name the worker but that it does not hold (given
        to it just before it stopped): the leader places them again at once, not after
        the failover time.

        Without the withdrawal, an owner that saw the acknowledgement could transfer
        the lease after this worker is gone, and the shard would wait the failover
        time. The transfer is conditional on the request still naming its receiver, so
        either the withdrawal or the transfer comes first: a refused withdrawal means
        the lease is this worker's now, and it is released below."""
        waiting = sorted(self._receiving)
        tasks = [self._receiving.pop(key) for key in waiting]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        me = self._worker_id
        moved = [key for key in waiting if not await self._store.withdraw(key, me)]
        for key in sorted(set(await self._store.owned_by(me)) | set(moved)):
            if self._holder.holds(key):
                continue
            lease = await self._store.get_lease(key)
            if lease is not None and lease.owner == me:
                with contextlib.suppress(LeaseLostError):
                    await self._store.release(lease)
                    self._log.info("lease passed on", shard_id=key, why="this worker is stopping")


def receivers_for(
    leases: list[Lease], board: Board, order: list[str], me: str
) -> list[tuple[Lease, str]]:
    """Where a leaving worker asks its leases to go: each, in key order, to the live
    worker (of ``order``, not leaving, not ``me``) holding fewest by the board and the
    requests planned before it; none if no such worker."""
    counts = {
        worker: board.slots[worker].held
        for worker in order
        if worker != me and not board.slots[worker].leaving
    }
    planned = []
    for lease in sorted(leases, key=lambda lease: lease.key):
        if not counts:
            break
        to = min(sorted(counts), key=lambda worker: counts[worker])
        counts[to] += 1
        planned.append((lease, to))
    return planned
