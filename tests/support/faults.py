"""Fault-injecting variants of the lander, loaded by worker processes in tests."""

from __future__ import annotations

import os
from collections.abc import Mapping

from consumer.landing.lander import Lander
from consumer.landing.objects import ObjectStore, PutOutcome
from consumer.lifecycle.processor import WorkerContext


class _DieAfterPuts:
    """Passes puts through; kills the process right after the n-th lands."""

    def __init__(self, inner: ObjectStore, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.puts = 0

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        outcome = await self.inner.put_if_absent(key, body, metadata)
        self.puts += 1
        if self.puts >= self.limit:
            # Landed, never checkpointed: the crash the exactly-once protocol must survive.
            os._exit(137)
        return outcome

    async def list_keys(self, prefix: str) -> list[str]:
        return await self.inner.list_keys(prefix)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)


class CrashAfterPut(Lander):
    """The lander, dying between the put and the checkpoint of the
    ``$FAULT_CRASH_AFTER_PUTS``-th object."""

    @classmethod
    def archive(cls, context: WorkerContext) -> tuple[ObjectStore, str]:
        store, prefix = super().archive(context)
        return _DieAfterPuts(store, int(os.environ["FAULT_CRASH_AFTER_PUTS"])), prefix
