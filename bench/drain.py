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
import json
import os
import pstats
import sys
import time
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aiobotocore.session import get_session

from bench.drain_sides import (
    ASYNC_KINESIS,
    BARE,
    BARE_EPOCH,
    WORKER,
    Run,
    async_kinesis_drain,
    bare_drain,
    worker_drain,
)
from bench.local_aws import LOOPBACK, LocalAws, boto3_client, create_stream, shard_hash_keys
from bench.peers import PeersUnavailableError, ensure_peers_venv
from bench.report import RESULTS, fmt, heading, median, progress, table
from consumer.aws import client_config, region

TARGET_RATIO = 0.9
PUT_BATCH = 500

BASELINE = {WORKER: BARE, BARE_EPOCH: BARE, ASYNC_KINESIS: BARE}
"""What each side is compared with (besides plain bare, which every side is)."""


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


# -- one side under cProfile ------------------------------------------------------------


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
