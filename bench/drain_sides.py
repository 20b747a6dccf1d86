"""The sides of the drain benchmark (:mod:`bench.drain`): each reads the pre-filled stream.

The bare loop (botocore's timestamp parser or the worker's), an in-process ``Worker``
with a counting processor, and ``async-kinesis`` in a venv of its own each read every
shard to its expected count and return a :class:`Run`, GetRecords calls timed alike.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import statistics
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from aiobotocore.session import AioSession, get_session

from bench.peers import ASYNC_KINESIS_DRAIN
from consumer.aws import Clients, aws_session, client_config, region
from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.lifecycle.processor import Checkpointer, InitializationInput, ProcessRecordsInput
from consumer.lifecycle.worker import Worker, tune_gc
from consumer.stream import RecordsPage, Shard, StartAt
from consumer.stream.kinesis import KinesisStream
from consumer.stream.reader import MIN_CALL_INTERVAL

BARE = "bare"
WORKER = "worker"
BARE_EPOCH = "bare, epoch timestamps"
ASYNC_KINESIS = "async-kinesis"

DEFAULT_GC = gc.get_threshold()


@dataclass(frozen=True)
class CallStats:
    """How GetRecords calls were spread over the run."""

    calls: int
    """GetRecords calls that returned records."""
    mean_in_flight: float
    """Average number of GetRecords calls outstanding (4 = every shard always waiting)."""
    mean_gap_seconds: float
    """Average time, per shard, from one call's response to the next call."""


@dataclass
class Run:
    """One side's timing of one drain."""

    side: str
    round: int
    records: int
    seconds: float
    first_record_seconds: float
    get_records: CallStats
    stop_seconds: float | None = None
    checkpoints: int | None = None
    checkpoint_seconds: float | None = None
    duplicates: int = 0
    cpu_seconds: float = 0.0
    """CPU time of this (the bench) process during the run, start-up and stop included."""
    emulator_cpu_seconds: dict[str, float] = field(default_factory=dict)
    load_average: float = 0.0
    """The machine's 1-minute load average when the run began (other work on it)."""
    details: dict[str, Any] = field(default_factory=dict)
    """Anything else a side reports (async-kinesis: its versions and settings)."""

    @property
    def rate(self) -> float:
        """Records per second from start to the last record."""
        return self.records / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        """Microseconds of this process's CPU per record."""
        return self.cpu_seconds / self.records * 1e6

    @property
    def steady_rate(self) -> float:
        """Records per second from the first record to the last (start-up excluded)."""
        return self.records / max(self.seconds - self.first_record_seconds, 1e-9)

    def as_dict(self) -> dict[str, Any]:
        """The run with its derived rates."""
        return {
            **asdict(self),
            "rate": self.rate,
            "steady_rate": self.steady_rate,
            "cpu_us_per_record": self.cpu_us_per_record,
            "kinesalite_cpu_us_per_record": self.emulator_cpu_seconds.get("kinesalite", 0.0)
            / self.records
            * 1e6,
            "moto_cpu_us_per_record": self.emulator_cpu_seconds.get("moto", 0.0)
            / self.records
            * 1e6,
        }


@dataclass
class CallLog:
    """When each GetRecords call that returned records started and ended, by shard.

    Empty pages are left out: once a shard is drained the worker polls it about once a
    second until the others are done, and those idle polls say nothing about throughput.
    """

    calls: list[tuple[str, float, float]] = field(default_factory=list)

    def add(self, shard: str, started: float) -> None:
        """Note a call on ``shard`` that started at ``started`` and has just returned."""
        self.calls.append((shard, started, time.perf_counter()))

    def stats(self, until: float | None = None) -> CallStats:
        """Concurrency and per-shard gaps of the calls started before ``until``."""
        calls = [c for c in self.calls if until is None or c[1] < until]
        if not calls:
            return CallStats(0, 0.0, 0.0)
        span = max(end for _, _, end in calls) - min(start for _, start, _ in calls)
        busy = sum(end - start for _, start, end in calls)
        gaps: list[float] = []
        by_shard: dict[str, list[tuple[float, float]]] = {}
        for shard, start, end in calls:
            by_shard.setdefault(shard, []).append((start, end))
        for spans in by_shard.values():
            spans.sort()
            gaps.extend(b[0] - a[1] for a, b in itertools.pairwise(spans))
        return CallStats(
            calls=len(calls),
            mean_in_flight=busy / span if span > 0 else 0.0,
            mean_gap_seconds=statistics.fmean(gaps) if gaps else 0.0,
        )


class TimedStream:
    """The worker's KinesisStream, noting each GetRecords call in a :class:`CallLog`.

    Shards are told apart by iterator: each page's next iterator belongs to the shard
    of the iterator that fetched it.
    """

    def __init__(self, inner: KinesisStream, log: CallLog) -> None:
        self.inner = inner
        self.log = log
        self._shard_of: dict[str, str] = {}

    async def list_shards(self) -> list[Shard]:
        """Delegate."""
        return await self.inner.list_shards()

    async def get_iterator(self, shard_id: str, start: StartAt) -> str:
        """Delegate, remembering the iterator's shard."""
        iterator = await self.inner.get_iterator(shard_id, start)
        self._shard_of[iterator] = shard_id
        return iterator

    async def get_records(self, iterator: str, limit: int) -> RecordsPage:
        """Delegate, timing the call."""
        shard = self._shard_of.pop(iterator, "?")
        started = time.perf_counter()
        page = await self.inner.get_records(iterator, limit)
        if page.records:
            self.log.add(shard, started)
        if page.next_iterator is not None:
            self._shard_of[page.next_iterator] = shard
        return page


# -- the baseline ------------------------------------------------------------------------


def sdk_session(epoch_timestamps: bool) -> AioSession:
    """A fresh aiobotocore session: botocore's default parser, or the worker's."""
    return aws_session() if epoch_timestamps else get_session()


async def bare_drain(
    stream: str, expected: dict[str, int], round_: int, epoch_timestamps: bool = False
) -> Run:
    """Read every shard to its expected count with nothing but GetRecords."""
    session = sdk_session(epoch_timestamps)
    log = CallLog()
    first: list[float] = []
    async with session.create_client(
        "kinesis", region_name=region(), config=client_config()
    ) as client:

        async def one_shard(shard_id: str, want: int) -> tuple[float, int]:
            response = await client.get_shard_iterator(
                StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )
            iterator: str | None = response["ShardIterator"]
            got = 0
            empty = 0
            last_call = -MIN_CALL_INTERVAL
            while got < want and iterator is not None:
                wait = last_call + MIN_CALL_INTERVAL - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                last_call = time.perf_counter()
                page = await client.get_records(ShardIterator=iterator, Limit=10_000)
                count = len(page["Records"])
                if count:
                    log.add(shard_id, last_call)
                if count and not first:
                    first.append(time.perf_counter())
                got += count
                empty = 0 if count else empty + 1
                if empty > 50:
                    raise RuntimeError(f"{shard_id}: {got} of {want} records, then nothing")
                iterator = page.get("NextShardIterator")
            return time.perf_counter(), got

        began = time.perf_counter()
        results = await asyncio.gather(*(one_shard(s, n) for s, n in expected.items()))
    end = max(t for t, _ in results)
    records = sum(n for _, n in results)
    return Run(
        side=BARE_EPOCH if epoch_timestamps else BARE,
        round=round_,
        records=records,
        seconds=end - began,
        first_record_seconds=first[0] - began,
        get_records=log.stats(),
    )


# -- the worker --------------------------------------------------------------------------


@dataclass
class Tally:
    """What every counting processor of one worker run has seen."""

    expected: int
    began: float = 0.0
    count: int = 0
    first_at: float | None = None
    last_at: float | None = None
    batches: int = 0
    checkpoints: int = 0
    checkpoint_seconds: float = 0.0
    by_shard: Counter[str] = field(default_factory=Counter)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class CountingProcessor:
    """Counts records, checkpoints once per non-empty batch (as a real processor would)."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.shard_id = "?"

    async def initialize(self, init: InitializationInput) -> None:
        """Remember the shard."""
        self.shard_id = init.shard_id

    async def process_records(self, batch: ProcessRecordsInput) -> None:
        """Count, then checkpoint the batch."""
        if not batch.records:
            return
        tally = self.tally
        now = time.perf_counter()
        if tally.first_at is None:
            tally.first_at = now
        tally.count += len(batch.records)
        tally.batches += 1
        tally.by_shard[self.shard_id] += len(batch.records)
        if tally.count >= tally.expected and not tally.done.is_set():
            tally.last_at = now
            tally.done.set()
        await batch.checkpointer.checkpoint()
        tally.checkpoints += 1
        tally.checkpoint_seconds += time.perf_counter() - now

    async def lease_lost(self) -> None:
        """Nothing buffered."""

    async def shard_ended(self, checkpointer: Checkpointer) -> None:
        """Nothing buffered."""

    async def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        """Everything counted is checkpointed already."""
        await checkpointer.checkpoint()


async def worker_drain(
    stream: str,
    expected: dict[str, int],
    round_: int,
    limit_seconds: float,
) -> Run:
    """Run one in-process worker on a fresh lease table until it has counted everything."""
    run_id = uuid.uuid4().hex[:8]
    settings = load_settings(
        stream=stream, lease_table=f"bench-drain-{run_id}", worker_id=f"bench-drain-{run_id}"
    )
    tally = Tally(expected=sum(expected.values()))
    log = CallLog()
    async with Clients() as clients:  # exactly as `lander run` makes them
        worker = Worker(
            settings,
            DynamoLeaseStore(clients.dynamodb, settings.lease_table),
            TimedStream(KinesisStream(clients.kinesis, stream), log),
            lambda: CountingProcessor(tally),
        )
        # As `lander run` does; undone after this run so the bare side keeps Python's
        # defaults.
        tune_gc()
        tally.began = time.perf_counter()
        running = asyncio.create_task(worker.run())
        counted = asyncio.create_task(tally.done.wait())
        await asyncio.wait([running, counted], timeout=limit_seconds, return_when="FIRST_COMPLETED")
        if not counted.done():
            counted.cancel()
            worker.request_stop()
            await asyncio.gather(running, return_exceptions=True)
            raise RuntimeError(
                f"worker counted {tally.count} of {tally.expected} records "
                f"({dict(tally.by_shard)}); run task done: {running.done()}"
            )
        stop_began = time.perf_counter()
        worker.request_stop()
        await running
        stop_seconds = time.perf_counter() - stop_began
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_GC)
    if tally.first_at is None or tally.last_at is None:
        raise RuntimeError("the worker finished without counting a record")
    return Run(
        side=WORKER,
        round=round_,
        records=tally.count,
        seconds=tally.last_at - tally.began,
        first_record_seconds=tally.first_at - tally.began,
        get_records=log.stats(until=tally.last_at),
        stop_seconds=stop_seconds,
        checkpoints=tally.checkpoints,
        checkpoint_seconds=tally.checkpoint_seconds,
        duplicates=sum(max(0, tally.by_shard[s] - n) for s, n in expected.items()),
    )


# -- async-kinesis ------------------------------------------------------------------------


async def async_kinesis_drain(
    python: str, stream: str, expected: dict[str, int], round_: int, limit_seconds: float
) -> Run:
    """Run bench/peers/async_kinesis_drain.py in the peers' venv; its timings as a Run.

    Its CPU is the subprocess's own (reported by it), not this process's.
    """
    process = await asyncio.create_subprocess_exec(
        python,
        str(ASYNC_KINESIS_DRAIN),
        stream,
        str(sum(expected.values())),
        "--timeout",
        str(limit_seconds),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=limit_seconds + 60)
    except TimeoutError:
        process.kill()  # exactly the process started above
        await process.wait()
        raise
    if process.returncode != 0:
        tail = "\n".join(err.decode(errors="replace").strip().splitlines()[-10:])
        raise RuntimeError(f"async-kinesis drain exited with {process.returncode}:\n{tail}")
    data = json.loads(out.decode().strip().splitlines()[-1])
    log = CallLog([(str(s), float(a), float(b)) for s, a, b in data["calls"]])
    run = Run(
        side=ASYNC_KINESIS,
        round=round_,
        records=int(data["records"]),
        seconds=float(data["seconds"]),
        first_record_seconds=float(data["first_record_seconds"]),
        get_records=log.stats(until=float(data["last_record_at"])),
        stop_seconds=float(data["stop_seconds"]),
        checkpoints=len(data["checkpoints"]),
        cpu_seconds=float(data["cpu_seconds"]),
    )
    run.details = {"versions": data["versions"], "settings": data["settings"]}
    return run
