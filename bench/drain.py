"""Drain: one in-process worker over a pre-filled 4-shard stream, against a bare loop
and against the ``async-kinesis`` package.

Every side reads the same kinesalite stream from TRIM_HORIZON in the same run, and the
sides alternate (bare, worker, ..., bare, worker, ...) so that drift in the emulator or
the machine hits them alike.

* **bare**: one aiobotocore Kinesis client (the worker's client configuration); per
  shard GetShardIterator(TRIM_HORIZON), then GetRecords(Limit=10000) at most every
  0.2 s (the 5 calls/s/shard rule the worker also obeys) until the shard's records are
  all read; every shard at once.
* **worker**: ``consumer.lifecycle.worker.Worker`` on a fresh lease table with a counting
  processor that checkpoints once per batch. At the 10,000-record pages of this drain
  that is what the lander does too (it checkpoints once per landed file, and a file
  holds at most 10,000 records). Timed from ``run()`` to the moment the processor has
  counted every record; start-up (table, shard sync, first lease pass, first
  GetRecords) is included, and also reported on its own as time to first record.
* **bare, epoch timestamps**: the bare loop with the response parser the worker uses
  (``consumer.aws.aws_session``: Kinesis' epoch-second timestamps straight to UTC
  datetimes, instead of botocore's default ``parse_timestamp`` into a ``tzlocal()``
  datetime through dateutil, about 12 us per record). Worker against this side is the
  like-for-like ratio; against plain bare it is what a user's own loop would do.
* **async-kinesis**: the ``async-kinesis`` package's ``Consumer`` in a subprocess of
  its own virtualenv (``.venv-peers``, see :mod:`bench.peers`), in-memory
  checkpointer, 5 calls/s/shard (:mod:`bench.peers.async_kinesis_drain`).

The ratio is a side's median rate over the median rate of its baseline (target for
the worker: >= 0.9 of bare).
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import itertools
import json
import os
import pstats
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from aiobotocore.session import AioSession, get_session

from bench.local_aws import LOOPBACK, LocalAws, boto3_client, create_stream, shard_hash_keys
from bench.peers import ASYNC_KINESIS_DRAIN, PeersUnavailableError, ensure_peers_venv
from bench.report import RESULTS, fmt, heading, median, progress, table
from consumer.aws import Clients, aws_session, client_config, region
from consumer.config import load_settings
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.lifecycle.processor import Checkpointer, InitializationInput, ProcessRecordsInput
from consumer.lifecycle.worker import Worker, tune_gc
from consumer.stream import RecordsPage, Shard, StartAt
from consumer.stream.kinesis import KinesisStream
from consumer.stream.reader import MIN_CALL_INTERVAL

TARGET_RATIO = 0.9
PUT_BATCH = 500

BARE = "bare"
WORKER = "worker"
BARE_EPOCH = "bare, epoch timestamps"
ASYNC_KINESIS = "async-kinesis"
BASELINE = {WORKER: BARE, BARE_EPOCH: BARE, ASYNC_KINESIS: BARE}
"""What each side is compared with (besides plain bare, which every side is)."""


DEFAULT_GC = gc.get_threshold()


@dataclass(frozen=True)
class DrainConfig:
    """What to measure."""

    records_per_shard: int = 20_000
    shards: int = 4
    rounds: int = 3
    payload_bytes: int = 200
    putters: int = 8
    timeout_seconds: float = 600.0
    epoch_timestamps: bool = True
    """Also run the bare loop with the worker's epoch-timestamp parser (like for like)."""
    peers: bool = True
    """Also run the async-kinesis package (installs .venv-peers when missing)."""
    profile: bool = False
    """cProfile each worker run; stats to bench/results/<name>.prof, top lines printed."""


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
    lease_scan_seconds: float | None = None
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


# -- filling the stream ----------------------------------------------------------------


def _payload(shard: int, n: int, size: int) -> bytes:
    body = {"id": f"{shard}-{n}", "shard": shard, "n": n, "source": "bench-drain", "pad": ""}
    pad = size - len(json.dumps(body, separators=(",", ":")))
    body["pad"] = "x" * max(pad, 0)
    return json.dumps(body, separators=(",", ":")).encode()


async def fill(stream: str, hash_keys: Sequence[str], config: DrainConfig) -> float:
    """Put ``records_per_shard`` records on every shard; returns the seconds it took.

    PutRecords with 500 entries, each call spread over every shard, from several
    concurrent putters (kinesalite takes about 5k records/s); failed entries are retried.
    """
    total = config.records_per_shard * len(hash_keys)
    queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
    for start in range(0, total, PUT_BATCH):
        entries = []
        for i in range(start, min(start + PUT_BATCH, total)):
            shard = i % len(hash_keys)
            entries.append(
                {
                    "Data": _payload(shard, i // len(hash_keys), config.payload_bytes),
                    "PartitionKey": f"pk-{i}",
                    "ExplicitHashKey": hash_keys[shard],
                }
            )
        queue.put_nowait(entries)

    async def putter(client: Any) -> None:
        while not queue.empty():
            entries = queue.get_nowait()
            while entries:
                result = await client.put_records(StreamName=stream, Records=entries)
                entries = [
                    entry
                    for entry, out in zip(entries, result["Records"], strict=True)
                    if "ErrorCode" in out
                ]

    began = time.perf_counter()
    session = get_session()
    async with session.create_client(
        "kinesis", region_name=region(), config=client_config(config.putters)
    ) as client:
        await asyncio.gather(*(putter(client) for _ in range(config.putters)))
    return time.perf_counter() - began


# -- the SDK's timestamp parser ----------------------------------------------------------


def sdk_session(epoch_timestamps: bool) -> AioSession:
    """A fresh aiobotocore session: botocore's default parser, or the worker's."""
    return aws_session() if epoch_timestamps else get_session()


# -- the baseline ------------------------------------------------------------------------


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
        lease_scan_seconds=settings.scan_interval,
        duplicates=sum(max(0, tally.by_shard[s] - n) for s, n in expected.items()),
    )


async def profiled(side: Awaitable[Run], name: str) -> Run:
    """Run one side under cProfile, save the stats and print where the time went."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        run = await side
    finally:
        profile.disable()
    run.load_average = os.getloadavg()[0]
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.prof"
    profile.dump_stats(path)
    heading(f"profile of {name} (cProfile; {path.name})")
    stats = pstats.Stats(profile, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(25)
    return run


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


# -- the benchmark ---------------------------------------------------------------------


def summarise(runs: list[Run]) -> dict[str, Any]:
    """Medians per side, the ratio to bare and to the side's own baseline."""
    sides: dict[str, list[Run]] = {}
    for run in runs:
        sides.setdefault(run.side, []).append(run)
    rates = {side: median([r.rate for r in side_runs]) for side, side_runs in sides.items()}
    steadies = {
        side: median([r.steady_rate for r in side_runs]) for side, side_runs in sides.items()
    }
    bare_rate, bare_steady = rates[BARE], steadies[BARE]
    summary: dict[str, Any] = {}
    for side, side_runs in sides.items():
        rate, steady = rates[side], steadies[side]
        baseline = BASELINE.get(side, BARE) if BASELINE.get(side, BARE) in rates else BARE
        summary[side] = {
            "runs": len(side_runs),
            "median_rate": rate,
            "median_steady_rate": steady,
            "median_seconds": median([r.seconds for r in side_runs]),
            "median_first_record_seconds": median([r.first_record_seconds for r in side_runs]),
            "median_cpu_us_per_record": median([r.cpu_us_per_record for r in side_runs]),
            "median_get_records_in_flight": median(
                [r.get_records.mean_in_flight for r in side_runs]
            ),
            "median_gap_seconds": median([r.get_records.mean_gap_seconds for r in side_runs]),
            "ratio_to_bare": rate / bare_rate,
            "steady_ratio_to_bare": steady / bare_steady,
            "baseline": baseline,
            "ratio_to_baseline": rate / rates[baseline],
            "steady_ratio_to_baseline": steady / steadies[baseline],
            "median_checkpoint_seconds": median(
                [r.checkpoint_seconds for r in side_runs if r.checkpoint_seconds is not None]
            ),
            "median_stop_seconds": median(
                [r.stop_seconds for r in side_runs if r.stop_seconds is not None]
            ),
            "target_met": None if side != WORKER else rate / bare_rate >= TARGET_RATIO,
        }
    return summary


async def measured(aws: LocalAws, side: Awaitable[Run]) -> Run:
    """Run one side, adding the CPU this process and each emulator used meanwhile."""
    load = os.getloadavg()[0]
    cpu, emulators = time.process_time(), aws.cpu_seconds()
    run = await side
    run.load_average = load
    if run.side != ASYNC_KINESIS:  # that one reports its own process's CPU
        run.cpu_seconds = time.process_time() - cpu
    run.emulator_cpu_seconds = {
        name: used - emulators[name] for name, used in aws.cpu_seconds().items()
    }
    return run


async def run_drain(aws: LocalAws, config: DrainConfig) -> dict[str, Any]:
    """Fill a stream, then alternate bare and worker drains; print and return results."""
    kinesis = boto3_client(aws.env, "kinesis")
    stream = f"bench-drain-{uuid.uuid4().hex[:8]}"
    if LOOPBACK not in kinesis.meta.endpoint_url:
        raise RuntimeError(f"refusing to fill {kinesis.meta.endpoint_url}: not loopback")
    create_stream(kinesis, stream, config.shards)
    hash_keys = shard_hash_keys(kinesis, stream)
    total = config.records_per_shard * config.shards
    progress(f"drain: filling {stream} with {total:,} records ({config.shards} shards)")
    fill_seconds = await fill(stream, list(hash_keys.values()), config)
    progress(f"drain: filled in {fill_seconds:.1f} s ({total / fill_seconds:,.0f} records/s)")
    expected = dict.fromkeys(hash_keys, config.records_per_shard)

    peers_python: str | None = None
    peers_skipped: str | None = None if config.peers else "not asked for (--no-peers)"
    if config.peers:
        try:
            peers_python = str(ensure_peers_venv())
        except PeersUnavailableError as exc:
            peers_skipped = f"the peers' venv could not be installed: {exc}"
            progress(f"drain: async-kinesis skipped: {peers_skipped}")

    sides = [BARE, WORKER]
    if config.epoch_timestamps:
        sides.append(BARE_EPOCH)
    if peers_python is not None:
        sides.append(ASYNC_KINESIS)
    runs: list[Run] = []
    for round_ in range(1, config.rounds + 1):
        for side in sides:
            work: Awaitable[Run]
            if side == ASYNC_KINESIS and peers_python is not None:
                work = async_kinesis_drain(
                    peers_python, stream, expected, round_, config.timeout_seconds
                )
            elif side in (BARE, BARE_EPOCH):
                work = bare_drain(stream, expected, round_, epoch_timestamps=side == BARE_EPOCH)
            else:
                work = worker_drain(stream, expected, round_, config.timeout_seconds)
            if config.profile and side != ASYNC_KINESIS:
                name = side.replace(", ", "-").replace(" ", "-")
                run = await profiled(work, f"drain-{name}-{round_}")
            else:
                run = await measured(aws, work)
            runs.append(run)
            progress(
                f"drain round {round_} {run.side}: {run.records:,} records in "
                f"{run.seconds:.2f} s = {run.rate:,.0f}/s (first record after "
                f"{run.first_record_seconds:.2f} s)"
            )
    summary = summarise(runs)
    result = {
        "benchmark": "drain",
        "config": asdict(config),
        "stream": stream,
        "fill_seconds": fill_seconds,
        "fill_rate": total / fill_seconds,
        "runs": [run.as_dict() for run in runs],
        "summary": summary,
        "target_ratio": TARGET_RATIO,
        "async_kinesis": {
            "ran": peers_python is not None,
            "skipped": peers_skipped,
            **next((r.details for r in runs if r.side == ASYNC_KINESIS), {}),
        },
    }
    print_drain(result)
    return result


def print_drain(result: dict[str, Any]) -> None:
    """The drain tables, on stdout."""
    print(f"\n{render_drain(result)}", flush=True)


def render_drain(result: dict[str, Any]) -> str:
    """The drain tables: every run, then the medians per side with their ratios."""
    config = result["config"]
    lines = [
        f"== drain: {config['shards']} shards x {config['records_per_shard']:,} records "
        f"(~{config['payload_bytes']} B), {config['rounds']} rounds alternating ==",
        f"fill: {result['fill_seconds']:.1f} s, {result['fill_rate']:,.0f} records/s "
        f"({config['putters']} putters, PutRecords x{PUT_BATCH})",
    ]
    rows = [
        [
            run["round"],
            run["side"],
            run["records"],
            run["seconds"],
            run["rate"],
            run["first_record_seconds"],
            run["steady_rate"],
            run["get_records"]["mean_in_flight"],
            run["get_records"]["mean_gap_seconds"],
            run["cpu_us_per_record"],
            run["kinesalite_cpu_us_per_record"],
            run.get("moto_cpu_us_per_record"),
            run["load_average"],
        ]
        for run in result["runs"]
    ]
    headers = [
        "round",
        "side",
        "records",
        "seconds",
        "records/s",
        "first rec s",
        "steady rec/s",
        "in flight",
        "gap s",
        "py us/rec",
        "kinesalite us/rec",
        "moto us/rec",
        "load",
    ]
    lines += [table(headers, rows), ""]
    rows = [
        [
            side,
            values["median_rate"],
            values["ratio_to_bare"],
            values["steady_ratio_to_bare"],
            values.get("baseline", "bare"),
            values.get("ratio_to_baseline", values["ratio_to_bare"]),
            values["median_first_record_seconds"],
            values["median_steady_rate"],
            values["median_cpu_us_per_record"],
            values["median_gap_seconds"],
            "-" if values["target_met"] is None else fmt(values["target_met"]),
        ]
        for side, values in result["summary"].items()
    ]
    headers = [
        "side (median)",
        "records/s",
        "x bare",
        "steady x bare",
        "baseline",
        "x baseline",
        "first rec s",
        "steady rec/s",
        "py us/rec",
        "gap s",
        f">= {result['target_ratio']}",
    ]
    lines.append(table(headers, rows))
    peer = result.get("async_kinesis", {})
    if peer.get("skipped"):
        lines.append(f"async-kinesis: not run: {peer['skipped']}")
    elif peer.get("versions"):
        versions = ", ".join(f"{k} {v}" for k, v in peer["versions"].items())
        lines.append(f"async-kinesis: {versions}, in .venv-peers; {peer['settings']}")
    lines.append(
        "records/s: start to last record; steady: first record to last record; "
        "first rec s: start-up cost; in flight: mean GetRecords calls outstanding; gap s: "
        "mean time per shard from a GetRecords response to the next call; us/rec: CPU per "
        "record of the consuming process (async-kinesis: its subprocess, after its imports), "
        "of kinesalite and of moto (the lease table); load: 1-min load average at the start."
    )
    return "\n".join(lines)
