"""Waiting with a deadline without losing a cancellation.

On Python 3.11 ``asyncio.wait_for`` returns the awaited result when a cancellation
arrives in the same step as that result: the cancellation is dropped. A shard reader
napping on its stop event is exactly that case (the stop is set, then its task is
cancelled): the reader ran on, its last page could not be queued, and the shard never
stopped, silently, until the worker exited. ``asyncio.timeout`` does not drop it, so
every deadline in this package uses it (ruff bans ``asyncio.wait_for``).
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; True if it is set. A cancellation always
    propagates, even one that comes as the event is set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
