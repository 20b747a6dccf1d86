"""Tests that wait on lease timing, run in simulated time.

``@simulated`` turns an ``async def`` test into a plain one that runs its coroutine on
:mod:`bench.virtual_time`'s event loop: ``time.monotonic()`` and the loop's clock read
a virtual clock that jumps to the next timer whenever every task waits. A worker's
failover time, beats, sweeps and the test's own polling then cost no wall time at all,
only the CPU of what happens in between. Only for tests on the in-memory stores and
streams: nothing may wait on a socket, a thread or a process (the loop polls no file
descriptor but its own).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec

from bench import virtual_time

P = ParamSpec("P")


def simulated(test: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """Run an async test in simulated time (see the module)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        virtual_time.run(test(*args, **kwargs), virtual_time.VirtualClock())

    return run
