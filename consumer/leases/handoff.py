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
from typing import TYPE_CHECKING

import structlog

from consumer.aio import batched
from consumer.leases.board import line
from consumer.leases.model import Lease, LeaseError, LeaseLostError

if TYPE_CHECKING:
    from consumer.leases.board_coordinator import BoardCoordinator

log = structlog.get_logger("consumer.leases")

POLL_SECONDS = 0.1
"""How often a receiver reads a lease being handed to it."""
ACK_POLL_SECONDS = 0.25
"""How often an owner asked for a hand-off reads the lease for its receiver's ack."""


async def pass_on(w: BoardCoordinator, lease: Lease) -> None:
    """Release a lease given to a worker that is leaving, and tell the leader."""
    try:
        await w.store.release(lease)
    except LeaseLostError:
        return
    log.info("lease passed on", shard_id=lease.key, worker_id=w.worker_id, why="leaving")
    await w.notify_leader()


async def await_handoff(w: BoardCoordinator, key: str, owner: str | None) -> None:
    """Poll a lease being handed to this worker until its owner transfers it."""
    deadline = w.clock() + 2 * w.failover
    nudged = w.clock()
    try:
        while w.clock() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            lease = await w.store.get_lease(key)
            if lease is None:
                return
            if lease.owner == w.worker_id:
                if key not in w.held:
                    await w.take_given(lease)  # passed on if leaving meanwhile
                return
            if lease.handoff_to != w.worker_id:
                return
            if owner is not None and w.clock() - nudged >= w.renew_interval:
                await w.courier.deliver(owner, [key])
                nudged = w.clock()
    except Exception as exc:  # a lease left where it is is picked up by the leader
        log.warning(
            "waiting for a hand-off failed", shard_id=key, worker_id=w.worker_id, error=repr(exc)
        )
    finally:
        w.waits.pop(key, None)


async def await_ack(w: BoardCoordinator, key: str) -> None:
    """Poll a lease the leader asked this worker to hand over until its receiver
    acknowledges (then stop reading it), so the hand-off waits for the receiver's
    beat, not for this worker's next one."""
    deadline = w.clock() + 2 * w.failover
    try:
        while w.clock() < deadline and key in w.held:
            await asyncio.sleep(ACK_POLL_SECONDS)
            lease = await w.store.get_lease(key)
            if lease is None or lease.owner != w.worker_id or lease.handoff_to is None:
                return
            if lease.handoff_ack == lease.handoff_to:
                w.notice_handoff(lease)
                return
    except Exception as exc:  # the next notice looks again
        log.warning(
            "waiting for a hand-off ack failed",
            shard_id=key,
            worker_id=w.worker_id,
            error=repr(exc),
        )
    finally:
        w.acks.pop(key, None)


async def start_leaving(w: BoardCoordinator) -> None:
    """Flag the worker's slot as leaving and ask for the hand-off of every held lease
    at once, each to the live worker holding fewest (the leader would do the same at
    its next pass; this saves that wait), and wake the receivers. Each shard stops
    when its receiver acknowledges. The requests go out together (a worker holding
    fifty leases asked one after another would start its last hand-off seconds late)."""
    w.leaving = w.stopping = True
    if w.slot is None:
        return
    with contextlib.suppress(LeaseLostError):
        await w.beat()
    try:
        board = await w.read_board()
    except LeaseError as exc:  # the leader hands the leases on when it sees the flag
        log.warning("leaving: could not read the workers table", error=str(exc))
        return
    order = line(board, w.slot_seen, w.clock(), w.failover)
    load = {
        worker: board.slots[worker].held
        for worker in order
        if worker != w.worker_id and not board.slots[worker].leaving
    }
    planned: list[tuple[str, str]] = []
    for key, held in sorted(w.held.items()):
        if not load or held.lost or held.lease.handoff_to is not None:
            continue
        to = min(sorted(load), key=lambda worker: load[worker])
        load[to] += 1
        planned.append((key, to))
    asked = await batched([w.store.request_handoff(w.held[k].lease, to) for k, to in planned])
    deliveries: dict[str, list[str]] = {}
    for (key, to), granted in zip(planned, asked, strict=True):
        if granted:  # refused: someone else's request stands, or the lease moved on
            deliveries.setdefault(to, []).append(key)
            w.acks[key] = asyncio.create_task(await_ack(w, key))
    for to, keys in deliveries.items():
        await w.courier.deliver(to, keys)
    log.info(
        "leaving: hand-offs asked",
        worker_id=w.worker_id,
        receivers={to: len(keys) for to, keys in sorted(deliveries.items())},
        held=len(w.held),
    )


async def release_unheld(w: BoardCoordinator) -> None:
    """Withdraw the acknowledgements of hand-offs to this worker not transferred yet,
    then release leases that name the worker but that it does not hold (given to it
    just before it stopped): the leader places them again at once, not after the
    failover time.

    Without the withdrawal, an owner that saw the acknowledgement could transfer the
    lease after this worker is gone, and the shard would wait the failover time. The
    transfer is conditional on the request still naming its receiver, so either the
    withdrawal or the transfer comes first: a refused withdrawal means the lease is
    this worker's now, and it is released below."""
    waiting = sorted(w.waits)
    tasks = [w.waits.pop(key) for key in waiting]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    moved = [key for key in waiting if not await w.store.withdraw(key, w.worker_id)]
    for key in sorted(set(await w.store.owned_by(w.worker_id)) | set(moved)):
        if key in w.held:
            continue
        lease = await w.store.get_lease(key)
        if lease is not None and lease.owner == w.worker_id:
            with contextlib.suppress(LeaseLostError):
                await w.store.release(lease)
                log.info(
                    "lease passed on",
                    worker_id=w.worker_id,
                    shard_id=key,
                    why="this worker is stopping",
                )
