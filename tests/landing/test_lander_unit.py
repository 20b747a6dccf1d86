"""The lander's reactions: put retries, a lease lost mid-flight, producer duplicates."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from consumer.config import ConfigError, load_settings
from consumer.landing.lander import Lander, RecentEventIds
from consumer.landing.objects import MemoryObjectStore, ObjectStoreError, PutOutcome
from consumer.landing.s3 import _wrap
from consumer.leases.model import LeaseLostError
from consumer.lifecycle.processor import InitializationInput, ProcessRecordsInput
from consumer.metrics import LanderMetrics
from consumer.sequence import Position, Sentinel
from consumer.stream.records import Record

SHARD = "shardId-000000000007"
T0 = datetime(2026, 11, 22, 6, 0, tzinfo=UTC)


class Checkpoints:
    """A checkpointer whose lease can be taken away after some number of checks."""

    def __init__(self, valid_checks: int = 10**9) -> None:
        self.positions: list[Position] = []
        self.valid_checks = valid_checks

    async def ensure_lease(self) -> None:
        self.valid_checks -= 1
        if self.valid_checks < 0:
            raise LeaseLostError(SHARD)

    async def checkpoint(self, position: Position | None = None) -> None:
        await self.ensure_lease()
        assert position is not None
        self.positions.append(position)


class FlakyStore(MemoryObjectStore):
    """Fails the first ``failures`` puts with the given error."""

    def __init__(self, failures: int, retriable: bool = True) -> None:
        super().__init__()
        self.failures = failures
        self.retriable = retriable
        self.attempts = 0

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            error = ObjectStoreError("S3 SlowDown")
            error.retriable = self.retriable
            raise error
        return await super().put_if_absent(key, body, metadata)


def _records(count: int, ids: list[str] | None = None) -> list[Record]:
    ids = ids or [f"e{i}" for i in range(count)]
    return [
        Record(
            SHARD,
            Position(10**55 + i),
            "k",
            json.dumps({"id": ids[i]}).encode(),
            T0 + timedelta(seconds=i),
        )
        for i in range(count)
    ]


async def _lander(store: MemoryObjectStore, **settings: Any) -> tuple[Lander, LanderMetrics]:
    config = load_settings(stream="s", lease_table="leases", max_records_per_file=5, **settings)
    metrics = LanderMetrics()
    lander = Lander(config, store, "a", metrics, clock=lambda: 0.0)
    await lander.initialize(InitializationInput(SHARD, "w", Sentinel.TRIM_HORIZON))
    return lander, metrics


async def test_retriable_put_failures_are_retried_until_landed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Throttled or failing puts are retried with backoff; the run lands once."""
    monkeypatch.setattr("consumer.landing.lander.backoff", lambda *a, **k: 0.0)
    store = FlakyStore(failures=3)
    lander, metrics = await _lander(store)
    checkpoints = Checkpoints()
    await lander.process_records(ProcessRecordsInput(_records(5), checkpoints, 0))
    await lander.shutdown_requested(checkpoints)
    assert store.attempts == 4
    assert len(store.objects) == 1
    assert metrics.value("lander_records_landed", shard_id=SHARD) == 5
    assert checkpoints.positions == [Position(10**55 + 4)]


async def test_non_retriable_put_failure_surfaces_without_checkpoint() -> None:
    """A put that cannot succeed raises to the worker (which restarts the shard from its
    checkpoint) and nothing is checkpointed."""
    store = FlakyStore(failures=1, retriable=False)
    lander, _ = await _lander(store)
    checkpoints = Checkpoints()
    with pytest.raises(ObjectStoreError):
        await lander.process_records(ProcessRecordsInput(_records(6), checkpoints, 0))
    assert checkpoints.positions == []


async def test_lease_lost_before_a_put_lands_nothing_more() -> None:
    """Once the lease is gone, no further object is put and nothing is checkpointed."""
    store = MemoryObjectStore()
    lander, metrics = await _lander(store)
    checkpoints = Checkpoints(valid_checks=2)  # first put + its checkpoint
    with pytest.raises(LeaseLostError):
        await lander.process_records(ProcessRecordsInput(_records(12), checkpoints, 0))
    await lander.lease_lost()
    assert len(store.objects) == 1
    assert checkpoints.positions == [Position(10**55 + 4)]
    assert metrics.value("lander_checkpoint_failures", shard_id=SHARD) == 0


async def test_producer_duplicates_dropped_by_event_id_and_counted() -> None:
    """With an event-id pointer and a window, a retried event lands once; the range of
    the run still covers the dropped record."""
    store = MemoryObjectStore()
    lander, metrics = await _lander(store, event_id_pointer="/id", dedup_window=100)
    checkpoints = Checkpoints()
    records = _records(5, ids=["a", "b", "a", "c", "b"])
    await lander.process_records(ProcessRecordsInput(records, checkpoints, 0))
    await lander.shutdown_requested(checkpoints)
    (body,) = store.objects.values()
    lines = [json.loads(line) for line in gzip.decompress(body).splitlines()]
    assert [line["event_id"] for line in lines] == ["a", "b", "c"]
    assert metrics.value("lander_duplicates_dropped", shard_id=SHARD, cause="producer") == 2
    (key,) = store.objects
    assert key.endswith(f"{10**55}-{10**55 + 4}.jsonl.gz")


async def test_retries_without_an_event_id_dropped_by_producer_number_and_counted() -> None:
    """With a sequence pointer and LANDER_DEDUP_KEYS, a number seen for its partition key
    lands once, even when retried after later numbers; records with an event id, other
    keys' numbers and payloads without a number all land."""
    store = MemoryObjectStore()
    lander, metrics = await _lander(
        store, event_id_pointer="/id", sequence_pointer="/seq", dedup_keys=10
    )
    payloads = [
        ("k", {"seq": 1}),
        ("k", {"seq": 2}),
        ("k", {"seq": 1}),  # a retry after a later number: dropped
        ("j", {"seq": 1}),  # another producer's 1
        ("k", {"seq": 2, "id": "e"}),  # an id: the id filter's business (off here)
        ("k", {"other": 2}),
    ]
    records = [
        Record(SHARD, Position(10**55 + i), key, json.dumps(data).encode(), T0)
        for i, (key, data) in enumerate(payloads)
    ]
    checkpoints = Checkpoints()
    await lander.process_records(ProcessRecordsInput(records, checkpoints, 0))
    await lander.shutdown_requested(checkpoints)
    landed = [
        json.loads(line)["sequence_number"]
        for body in store.objects.values()
        for line in gzip.decompress(body).splitlines()
    ]
    assert sorted(int(n) - 10**55 for n in landed) == [0, 1, 3, 4, 5]
    assert metrics.value("lander_duplicates_dropped", shard_id=SHARD, cause="sequence") == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dedup_keys": 5}, "LANDER_DEDUP_KEYS needs LANDER_SEQUENCE_POINTER"),
        ({"sequence_pointer": "/s", "payload_format": "raw"}, "with LANDER_PAYLOAD_FORMAT=raw"),
        ({"sequence_pointer": "seq"}, "must be a JSON pointer"),
    ],
)
def test_the_sequence_filter_settings_are_checked_at_start(
    settings: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(stream="s", lease_table="leases", **settings)


def test_recent_event_ids_are_bounded() -> None:
    """The filter remembers at most its size, forgetting the oldest first."""
    recent = RecentEventIds(2)
    assert not recent.seen("a")
    assert not recent.seen("b")
    assert recent.seen("a")
    assert not recent.seen("c")  # evicts b (a was refreshed)
    assert not recent.seen("b")
    assert recent.seen("c")


@pytest.mark.parametrize(
    ("code", "status", "retriable"),
    [("SlowDown", 503, True), ("InternalError", 500, True), ("AccessDenied", 403, False)],
)
def test_s3_errors_carry_their_retry_policy(code: str, status: int, retriable: bool) -> None:
    """Throttling and 5xx are retriable; access errors are not."""
    error = ClientError(
        # A partial response, as a test fake: only what the wrapper reads.
        {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}},  # type: ignore[typeddict-item]
        "PutObject",
    )
    assert _wrap(error).retriable is retriable  # type: ignore[attr-defined]
