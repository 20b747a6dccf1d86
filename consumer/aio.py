"""Waiting with a deadline without losing a cancellation.

On Python 3.11 ``asyncio.wait_for`` returns the awaited result when a cancellation
arrives in the same step as that result: the cancellation is dropped. A shard reader
napping on its stop event is exactly that case (the stop is set, then its task is
cancelled): the reader ran on, its last page could not be queued, and the shard never
stopped, silently, until the worker exited. ``asyncio.timeout`` does not drop it, so
every deadline in this package uses it (ruff bans ``asyncio.wait_for``).

:func:`stop_task` stops a task that feeds a bounded queue without trusting that the
cancellation arrives: what it queues meanwhile is dropped, and the cancellation is sent
again after a grace for its clean-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

STOP_POLL_SECONDS = 0.05
"""How often :func:`stop_task` drops what its task queued."""
CANCEL_AGAIN_SECONDS = 5.0
"""How long :func:`stop_task` lets a cancelled task clean up (close a connection, say)
before it sends the cancellation again, in case the first was lost."""


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; True if it is set. A cancellation always
    propagates, even one that comes as the event is set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def stop_task(
    task: asyncio.Task[Any],
    queue: asyncio.Queue[Any] | None = None,
    *,
    again: float = CANCEL_AGAIN_SECONDS,
) -> None:
    """Cancel ``task`` and wait until it ends, dropping what it puts into ``queue``
    meanwhile, and cancelling it again every ``again`` seconds: a producer that lost
    its cancellation would otherwise block for ever on a full queue nobody reads any
    more, and the wait with it. A cancellation of the caller cancels ``task`` too and
    propagates."""
    polls = max(1, round(again / STOP_POLL_SECONDS))
    try:
        task.cancel()
        waited = 0
        while not task.done():
            if queue is not None:
                while not queue.empty():
                    queue.get_nowait()
            await asyncio.wait({task}, timeout=STOP_POLL_SECONDS)
            waited += 1
            if waited % polls == 0:
                task.cancel()
    except asyncio.CancelledError:
        task.cancel()
        raise
    await asyncio.gather(task, return_exceptions=True)  # done: only collects it


CONCURRENT_CALLS = 32
"""Calls :func:`batched` keeps in flight at once (a leader's cold start gives every
lease; a worker reads all of its leases)."""

_T = TypeVar("_T")


async def batched(calls: list[Coroutine[Any, Any, _T]]) -> list[_T]:
    """Await the calls, at most :data:`CONCURRENT_CALLS` at a time, results in order."""
    results: list[_T] = []
    for start in range(0, len(calls), CONCURRENT_CALLS):
        results.extend(await asyncio.gather(*calls[start : start + CONCURRENT_CALLS]))
    return results
