"""How oversubscribed the machine is: the measure the tests' timing bounds stretch by."""

from __future__ import annotations

import os


def load_factor() -> float:
    """The last minute's run queue per core, at least 1: how many tests' worth of work
    shared each core lately (3 xdist workers, their emulators and a JVM on 2 cores)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
