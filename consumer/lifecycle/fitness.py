"""Whether a worker can land: a worker that cannot gives its shards back.

When one shard's processor has failed ``landing_failures`` times in a row, the worker
runs its processor's probe (the lander's: a conditional put into the archive). If the
probe fails too, the fault is the worker's, not the shard's: it stops being ready,
releases every shard, takes and asks for none, and probes again with backoff until a
probe passes. If the probe passes (or the processor has none), the shard is retried in
place and reported as stuck (checkpoint age, pending records, last error) in the
metrics and its lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from consumer.aws import backoff
from consumer.errors import summary
from consumer.lifecycle.processor import Probe
from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.lifecycle.worker")

PROBE_TIMEOUT = 30.0
"""Seconds a probe may take before it counts as failed."""


class Fitness:
    """Whether this worker can land, by its processor's probe: ``on_change(False)``
    when it cannot (give every shard back), ``on_change(True)`` once a probe passes."""

    def __init__(
        self,
        probe: Probe | None,
        metrics: LanderMetrics,
        stopping: asyncio.Event,
        on_change: Callable[[bool], None],
        worker_id: str,
    ) -> None:
        self.probe = probe
        self._failed: str | None = None
        """Why the probe fails (None while it passes, or has not run)."""
        self._superseded: str | None = None
        """Why the fleet lands a stream otherwise than this worker would (None: it agrees)."""
        self.give_back = asyncio.Event()
        """Set while unfit: a shard waiting to restart stops waiting and gives up."""
        self._metrics = metrics
        self._stopping = stopping
        self._on_change = on_change
        self._probing: asyncio.Task[None] | None = None
        self._log = log.bind(worker_id=worker_id)
        metrics.landing_healthy.set(1)
        metrics.landing_agreed.set(1)

    @property
    def unfit(self) -> str | None:
        """Why this worker cannot land right now (None while it can)."""
        return self._superseded or self._failed

    def supersede(self, reason: str | None) -> None:
        """The fleet lands a stream otherwise than this worker would (``reason``): give
        every shard back and take none; None when it agrees again (a rollback)."""
        if reason is not None and self._superseded is None:
            self._superseded = reason
            self._metrics.landing_agreed.set(0)
            self._log.error(
                "the fleet lands a stream otherwise than this worker: giving every shard "
                "back and taking none until restarted with the fleet's settings",
                reason=reason,
            )
            self.give_back.set()
            self._on_change(False)
        elif reason is None and self._superseded is not None:
            self._superseded = None
            self._metrics.landing_agreed.set(1)
            self._log.info("the fleet lands as this worker does again: taking shards")
            if self._failed is None:
                self.give_back.clear()
                self._on_change(True)

    async def check(self, key: str, held: list[str]) -> None:
        """A shard keeps failing: is it the shard, or can this worker not land at all?"""
        if self.probe is None or self.unfit is not None:
            return
        reason = await self._failure()
        if reason is None:
            self._log.warning(
                "shard keeps failing but the probe passes: retrying it here", shard_id=key
            )
            return
        self._failed = reason
        self._metrics.landing_healthy.set(0)
        self._log.error(
            "this worker cannot land: giving every shard back and taking none until a probe passes",
            reason=reason,
            shards=held,
        )
        self.give_back.set()
        self._on_change(False)
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(self._until_fit(), name="probe")

    async def _failure(self) -> str | None:
        """Why the probe fails, or None when it passes."""
        assert self.probe is not None
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self.probe()
        except Exception as exc:
            return summary(exc)
        return None

    async def _until_fit(self) -> None:
        attempt = 0
        while self._failed is not None and not self._stopping.is_set():
            attempt += 1
            await wait_any((self._stopping,), backoff(attempt, base=1.0, cap=30.0) + 1.0)
            if self._stopping.is_set():
                return
            reason = await self._failure()
            if reason is not None:
                self._failed = reason
                self._log.warning("probe failed; still not taking shards", reason=reason)
                continue
            self._failed = None
            self._metrics.landing_healthy.set(1)
            if self._superseded is not None:
                self._log.info("probe passed; still not taking shards", reason=self._superseded)
                return
            self.give_back.clear()
            self._on_change(True)
            self._log.info("probe passed: this worker can land again and takes shards")

    async def close(self) -> None:
        """Stop probing (the worker stops)."""
        if self._probing is not None:
            self._probing.cancel()
            await asyncio.gather(self._probing, return_exceptions=True)


async def wait_any(events: tuple[asyncio.Event, ...], seconds: float) -> None:
    """Sleep ``seconds``, or less if any of ``events`` is (or becomes) set."""
    if any(event.is_set() for event in events):
        return
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
