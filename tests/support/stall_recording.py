"""Recordings of a worker's ``/metrics`` while it stalls, and while it is healthy.

For tests/deploy/test_alert_rules.py, which replays them through the alerting rules with
promtool. A real worker runs in-process (the in-memory stream and lease table, the
lander on an in-memory archive) and its registry is sampled the way Prometheus would
scrape it, every ``PERIOD`` seconds.

**Time is scaled.** Each sample stands for one promtool interval of 1m, so the few
seconds recorded here become minutes for the rules (0.5 s per sample: x120), and the
converter (deploy/monitoring/recorded.py) scales the values that are durations
(checkpoint age, lag) by the same factor. The worker's own timings are shortened
roughly to match: runs are cut 0.3 s after their first record (the default flush is
60 s), leases renewed (and the stall gauges reported) every 0.5 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from unittest import mock

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import consumer.lifecycle.fitness
import consumer.lifecycle.shards
from consumer.config import Settings, load_settings
from consumer.landing.lander import Lander
from consumer.landing.objects import MemoryObjectStore, ObjectStoreError, PutOutcome, probe
from consumer.leases.memory import MemoryLeaseStore
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.stream.memory import MemoryStream

PERIOD = 0.5
"""Seconds between two samples (one promtool interval each)."""
WORKER_ID = "w1"
PREFIX = "kinesis"
SHARDS = 2
# A shard's processor restarts this long after a failure (the worker draws it at
# random, up to 30 s; fixed here so a recording always shows the same phases).
RESTART_SECONDS = 2.5
FAST = {
    "failover_seconds": 1.5,  # renewals, which report the stall gauges, every 0.5 s
    "shard_sync_seconds": 0.2,
    "poll_idle_seconds": 0.2,
    "shutdown_seconds": 3.0,
    "max_records_per_file": 5,
    "flush_seconds": 0.3,
    "landing_failures": 3,
}


@dataclass(frozen=True)
class Recording:
    """The ``/metrics`` pages of one worker, oldest first, and when each was taken."""

    pages: list[str]
    seconds: list[float]
    """Monotonic seconds of each page since the first."""

    @property
    def period(self) -> float:
        """Mean seconds between two pages."""
        if len(self.seconds) < 2:
            return PERIOD
        return (self.seconds[-1] - self.seconds[0]) / (len(self.seconds) - 1)

    def values(self, name: str, **labels: str) -> list[float | None]:
        """One series' value on each page (None where the page lacks it), for checks."""
        found: list[float | None] = []
        for page in self.pages:
            value = None
            for family in text_string_to_metric_families(page):
                for sample in family.samples:
                    if sample.name == name and labels.items() <= sample.labels.items():
                        value = float(sample.value)
            found.append(value)
        return found


class MissingBucket(MemoryObjectStore):
    """An archive whose bucket is gone: every write fails and retrying cannot help."""

    async def put_if_absent(self, key: str, body: bytes, metadata: Mapping[str, str]) -> PutOutcome:
        raise ObjectStoreError(
            "S3 NoSuchBucket: The specified bucket does not exist",
            retriable=False,
            kind="NoSuchBucket",
        )


def _settings() -> Settings:
    return load_settings(
        stream="s", lease_table="leases", worker_id=WORKER_ID, archive=f"s3://b/{PREFIX}", **FAST
    )


def _lander_worker(stream: MemoryStream, archive: MemoryObjectStore) -> Worker:
    """A worker landing with the built-in lander, with the lander's archive probe."""
    settings = _settings()
    metrics = LanderMetrics()

    async def check() -> None:
        await probe(archive, PREFIX)

    def factory() -> Lander:
        return Lander(settings, archive, PREFIX, metrics)

    return Worker(settings, MemoryLeaseStore(), stream, factory, metrics=metrics, probe=check)


async def _record(
    worker: Worker,
    *,
    samples: int,
    each: Callable[[int], None] = lambda _: None,
    done: Callable[[Recording], bool] = lambda _: False,
) -> Recording:
    """Run the worker; sample its registry every PERIOD until ``samples`` pages or
    ``done``; stop it. ``each(i)`` runs before page i (to put records)."""
    task = asyncio.create_task(worker.run())
    pages: list[str] = []
    seconds: list[float] = []
    start = time.monotonic()
    try:
        for i in range(samples):
            each(i)
            await asyncio.sleep(max(0.0, start + i * PERIOD - time.monotonic()))
            if task.done():
                await task  # the worker failed: raise its error
            pages.append(generate_latest(worker.metrics.registry).decode())
            seconds.append(time.monotonic() - start)
            if done(Recording(pages, seconds)):
                break
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 15)
    return Recording(pages, seconds)


UNHEALTHY_PAGES = 4
"""Pages in a row with ``lander_landing_healthy`` 0 that end a stalled recording: the
alert's ``for: 2m`` needs three (a 1m interval each), one more for margin."""


def unhealthy_for_a_while(recording: Recording) -> bool:
    """Whether the last UNHEALTHY_PAGES pages all show the worker unable to land."""
    healthy = recording.values("lander_landing_healthy")
    tail = healthy[-UNHEALTHY_PAGES:]
    return len(tail) == UNHEALTHY_PAGES and all(v == 0 for v in tail)


async def record_stalled_worker(*, max_samples: int = 120) -> Recording:
    """A worker whose archive bucket is missing, from start until it gave up landing.

    Both shards have records waiting. Each batch's put fails (NoSuchBucket, not
    retriable), the shard restarts from its checkpoint every RESTART_SECONDS, and its
    checkpoint age grows while records stay pending. After ``landing_failures`` (3)
    failures the worker probes the archive, the probe fails too, and the worker turns
    ``lander_landing_healthy`` 0, gives its shards back and takes none. Sampling stops
    once UNHEALTHY_PAGES pages in a row showed that (about 15 pages, 7 s in all on a
    quiet machine), or at ``max_samples`` (a minute: a loaded machine is slower to get
    there, and the caller checks that it did).
    """
    stream = MemoryStream(SHARDS)
    for i in range(40):
        stream.put(f'{{"i": {i}}}'.encode(), f"key-{i}")
    worker = _lander_worker(stream, MissingBucket())

    # The worker waits backoff(...) + 0.5 s before restarting a failed shard.
    delay = RESTART_SECONDS - 0.5
    with (
        mock.patch.object(consumer.lifecycle.shards, "backoff", return_value=delay),
        mock.patch.object(consumer.lifecycle.fitness, "backoff", return_value=delay),
    ):
        return await _record(worker, samples=max_samples, done=unhealthy_for_a_while)


async def record_healthy_worker(*, samples: int = 14) -> Recording:
    """The same worker landing normally: records keep arriving and are checkpointed."""
    stream = MemoryStream(SHARDS)
    worker = _lander_worker(stream, MemoryObjectStore())

    def put_some(i: int) -> None:
        for j in range(6):
            stream.put(f'{{"i": {i}, "j": {j}}}'.encode(), f"key-{i}-{j}")

    return await _record(worker, samples=samples, each=put_some)
