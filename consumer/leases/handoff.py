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
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from consumer.leases.board_coordinator import BoardCoordinator

log = structlog.get_logger("consumer.leases")

POLL_SECONDS = 0.1
"""How often a receiver reads a lease being handed to it."""
ACK_POLL_SECONDS = 0.25
"""How often an owner asked for a hand-off reads the lease for its receiver's ack."""


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
                await w.board_store.notify(owner)
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
