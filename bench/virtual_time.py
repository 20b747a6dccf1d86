"""Simulated time for asyncio code that does no real I/O: minutes pass in moments.

:func:`run` runs a coroutine on an event loop whose clock is a :class:`VirtualClock`:
``time.monotonic()`` (which asyncio's own ``loop.time()`` calls, as does the product's
code) reads the virtual clock, and when every task waits on a timer the loop's selector,
instead of blocking for the timeout, moves the clock forward by it. Work between two
timers takes no simulated time at all; nothing may wait on a socket or a thread (the
only file descriptor polled is the loop's own wake-up pipe).

The clock is patched for the whole process while :func:`run` runs, so one simulation
runs at a time.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClock:
    """Seconds since the simulation began; moves only when told to."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start
        self.start = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move forward (never back)."""
        if seconds > 0:
            self.now += seconds

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the start."""
        return self.now - self.start


class _Selector(selectors.DefaultSelector):
    """Polls without blocking; an idle wait moves the virtual clock instead."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events:
            return events
        if timeout is None:
            raise RuntimeError("simulation stalled: no task is ready and no timer is set")
        self._clock.advance(timeout)
        return []


def run(main: Coroutine[Any, Any, T], clock: VirtualClock) -> T:
    """Run ``main`` to completion in simulated time; the result of ``main``."""
    real = time.monotonic
    time.monotonic = clock
    loop = asyncio.SelectorEventLoop(_Selector(clock))
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            loop.close()
            time.monotonic = real
