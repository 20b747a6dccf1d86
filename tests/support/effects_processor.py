"""A processor whose every event calls a downstream once, through :mod:`consumer.effects`:
the chaos run's effects mode (tests/chaos/effects_run.py) runs it in its workers.

For each record it runs ``once.record(checkpointer, record, call)``: ``call`` POSTs to
``$CHAOS_EFFECTS_URL/effect`` with the record's event id as ``Idempotency-Key``, in
``$CHAOS_EFFECTS_MODE`` (``keyed``: :attr:`Mode.KEYED`, ``at-most-once``), up to
``$CHAOS_EFFECTS_CONCURRENCY`` records of a batch at a time (default 8); it
checkpoints after each batch. A record without an event id (a bad payload) is skipped:
``consumer.effects`` returns it as a ``no_key`` outcome and logs it, and it must not
stall the shard.

A refused connection is the one failure that certainly did not reach the downstream:
it raises :class:`EffectNotDone` (the claim is released, a later delivery runs it).
Anything else (a timeout, a dropped answer) leaves the outcome unknown. Its probe (a
worker's start-up check, and the check of a worker whose shards keep failing) is
``GET $CHAOS_EFFECTS_URL/health``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import aiohttp

from consumer.effects import EffectNotDone, Effects, Mode, ShardEffects
from consumer.lifecycle.processor import (
    Checkpointer,
    InitializationInput,
    Probe,
    ProcessRecordsInput,
    WorkerContext,
)
from consumer.stream.records import Record

URL = "CHAOS_EFFECTS_URL"
MODE = "CHAOS_EFFECTS_MODE"
CONCURRENCY = "CHAOS_EFFECTS_CONCURRENCY"
TIMEOUT = aiohttp.ClientTimeout(total=30)


class Downstream:
    """The side-effect server, one short connection per call (no pooled connection
    outlives a server that went away, so a call to it is refused, not dropped)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    async def call(self, key: str) -> dict[str, Any]:
        """POST the effect under ``key``; its receipt."""
        try:
            async with (
                aiohttp.ClientSession(timeout=TIMEOUT) as session,
                session.post(
                    f"{self.url}/effect", json={"key": key}, headers={"Idempotency-Key": key}
                ) as reply,
            ):
                body = await reply.json()
                if reply.status != 200:
                    raise RuntimeError(f"downstream answered {reply.status}: {body}")
        except aiohttp.ClientConnectorError as exc:
            raise EffectNotDone(f"downstream refused the connection: {exc}") from exc
        return {"receipt": str(body["receipt"])}

    async def health(self) -> None:
        """Raise unless the downstream answers."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(f"{self.url}/health") as reply,
        ):
            reply.raise_for_status()


class EffectsProcessor:
    """Calls the downstream once per event id, then checkpoints each batch."""

    @classmethod
    def for_worker(cls, context: WorkerContext) -> Callable[[], EffectsProcessor]:
        """One effects table client and downstream for the worker's shards."""
        effects = Effects.for_worker(context)
        downstream = Downstream(os.environ[URL])
        mode = Mode(os.environ.get(MODE, Mode.KEYED.value))
        limit = int(os.environ.get(CONCURRENCY, "8"))
        return lambda: cls(effects.shard(), downstream, mode, limit)

    @classmethod
    def probe_for_worker(cls, context: WorkerContext) -> Probe:
        """The downstream's health check."""
        return Downstream(os.environ[URL]).health

    def __init__(self, once: ShardEffects, downstream: Downstream, mode: Mode, limit: int) -> None:
        self.once = once
        self.downstream = downstream
        self.mode = mode
        self.limit = max(1, limit)

    async def initialize(self, init: InitializationInput) -> None:
        """Nothing to set up: consumer.effects' log lines name the shard."""

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Each record's effect once; then the checkpoint. The first failure other than
        a record without a key is raised after the batch's other calls ended."""
        gate = asyncio.Semaphore(self.limit)

        async def one(record: Record) -> None:
            async with gate:
                # A record without an event id comes back as a no_key outcome, logged
                # by consumer.effects with its shard and position (never raised).
                await self.once.record(
                    batch.checkpointer, record, self.downstream.call, mode=self.mode
                )

        results = await asyncio.gather(*(one(r) for r in batch.records), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if batch.records:
            await batch.checkpointer.checkpoint()

    async def lease_lost(self) -> None:
        """Nothing is buffered."""

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Nothing is buffered: every batch was checkpointed."""

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Every batch whose effects all ran was checkpointed. No checkpoint here: a
        batch cut short by the stop has records whose effects did not run."""
