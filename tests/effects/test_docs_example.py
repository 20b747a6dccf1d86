"""docs/effects.md's processor and README's variant, as written, in a worker on
DynamoDB (the emulator): each event's charge happens once, duplicates and a whole
second reading of the stream return the stored receipts; a record without an event id
is not charged and does not stall its shard."""

from __future__ import annotations

import asyncio
import re
import sys
import types
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from consumer.aws import Clients
from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.lifecycle.processor import WorkerContext
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.stream.memory import MemoryStream

pytestmark = pytest.mark.emulator

REPO = Path(__file__).resolve().parents[2]
OUTCOMES = ("done", "repeat", "no_key")


class Payments:
    """The downstream: charges counted per idempotency key."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def charge(self, amount: object, idempotency_key: str) -> Any:
        self.calls[idempotency_key] += 1
        return types.SimpleNamespace(id=f"ch_{idempotency_key}")


def _example(payments: Payments, doc: str, name: str) -> Any:
    path = REPO / doc
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    source = next(block for block in blocks if f"class {name}" in block)
    module = types.ModuleType("effects_example")
    module.payments = payments  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # the doc's own code
    return getattr(module, name)


async def _read_all(
    clients: Clients, stream: MemoryStream, table: str, effects: str, charges: Any
) -> LanderMetrics:
    settings = load_settings(
        stream="s",
        lease_table=table,
        worker_id=f"w-{uuid.uuid4().hex[:6]}",
        event_id_pointer="/event_id",
        effects_table=effects,
        failover_seconds=2.0,
        shard_sync_seconds=0.2,
        poll_idle_seconds=0.2,
    )
    metrics = LanderMetrics()
    factory = charges.for_worker(WorkerContext(settings, clients, metrics))
    worker = Worker(
        settings, DynamoLeaseStore(clients.dynamodb, table), stream, factory, metrics=metrics
    )
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(60):
        while sum(metrics.value("lander_effects", outcome=o) for o in OUTCOMES) < 31:
            await asyncio.sleep(0.1)
    worker.request_stop()
    await asyncio.wait_for(task, 20)
    return metrics


@pytest.mark.parametrize(
    ("doc", "name"), [("docs/effects.md", "Charges"), ("README.md", "ChargeProcessor")]
)
async def test_the_documented_processor_charges_each_event_once(
    aws_clients: Clients, doc: str, name: str
) -> None:
    payments = Payments()
    charges = _example(payments, doc, name)
    stream = MemoryStream(2)
    for i in range(30):  # 25 events, 5 of them put twice (a producer's retries)
        n = i % 25
        stream.put(f'{{"event_id": "order-{n}", "amount": {n}}}'.encode(), f"k{n}")
    # A producer's bug: no event id. Not charged, counted, and the shard goes on.
    stream.put(b'{"amount": 99}', "k3")
    effects = f"fx-{uuid.uuid4().hex[:10]}"
    first = await _read_all(aws_clients, stream, f"l1-{effects}", effects, charges)
    assert payments.calls == {f"order-{n}": 1 for n in range(25)}
    assert (
        first.value("lander_effects", outcome="done"),
        first.value("lander_effects", outcome="repeat"),
    ) == (25, 5)
    assert first.value("lander_effects", outcome="no_key") == 1
    # Another fleet (a new lease table) reads the whole stream again: nothing is charged.
    again = await _read_all(aws_clients, stream, f"l2-{effects}", effects, charges)
    assert again.value("lander_effects", outcome="repeat") == 30
    assert payments.calls == {f"order-{n}": 1 for n in range(25)}
