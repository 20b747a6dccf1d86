"""End-to-end latency by read mode: put -> delivered and put -> landed in S3, for a
polling worker and an enhanced fan-out (efo) worker reading the same stream in the same
run, on kinesis-local (the emulator with SubscribeToShard).

Two ``lander run`` processes, each its own application (lease table, archive prefix;
the efo one registers its stream consumer), land a 2-shard stream with
``LANDER_FLUSH_SECONDS=5`` through :class:`bench.latency_probe.TimedLander`, which notes
when each record reaches the processor. A producer puts timestamped records at a
steady rate; a watcher lists the bucket every 250 ms and reads each new object.
Baseline in the same run: a bare GetRecords poller, once a second per shard, measuring
put -> read. kinesis-local itself polls its shards once a second to push events, so on
it efo cannot beat a one-second poll: the ratio measured here is the emulator's, not
AWS's (about 70 ms against ~200 ms and up). Everything on 127.0.0.1; every process is
stopped by PID.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.local_aws import boto3_client, create_stream, local_aws
from consumer.archive.layout import parse_key
from consumer.cli.harness import start_worker

REPO = Path(__file__).resolve().parents[1]
FLUSH_SECONDS = 5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "count": len(values),
        "p50": round(_percentile(values, 0.50), 3),
        "p99": round(_percentile(values, 0.99), 3),
        "max": round(max(values), 3),
        "mean": round(statistics.fmean(values), 3),
    }


def _bare_reader(
    env: dict[str, str],
    stream: str,
    put_times: dict[str, float],
    out: dict[str, float],
    stop: threading.Event,
) -> None:
    kinesis = boto3_client(env, "kinesis")
    iterators = {
        shard["ShardId"]: kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        for shard in kinesis.list_shards(StreamName=stream)["Shards"]
    }
    while not stop.is_set():
        for shard_id, iterator in list(iterators.items()):
            page = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            now = time.time()
            for record in page["Records"]:
                out.setdefault(json.loads(record["Data"])["id"], now)
            iterators[shard_id] = page["NextShardIterator"]
        stop.wait(1.0)


MODES = ("polling", "efo")


def _watch(s3: Any, bucket: str, seen: set[str], landed: dict[str, dict[str, float]]) -> None:
    """Read every new landed object once; note when each record's object appeared."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            key = item["Key"]
            mode = key.split("/", 1)[0]
            if key in seen or mode not in landed or parse_key(key.split("/", 1)[1]) is None:
                continue  # seen, or not a landed object (the archive probe)
            seen.add(key)
            found = time.time()
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            for line in gzip.decompress(body).splitlines():
                landed[mode].setdefault(json.loads(line)["data"]["id"], found)


def _delivered(path: Path) -> dict[str, float]:
    """The probe's log: each id with the first time it reached the processor."""
    out: dict[str, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            ident, _, when = line.partition("\t")
            out.setdefault(ident, float(when))
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Produce for a while, watch the bucket, and report every latency distribution."""
    seconds = 20 if quick else 60
    rate = 50
    with (
        local_aws(kinesis="kinesis-local") as aws,
        tempfile.TemporaryDirectory() as workdir,
        tempfile.TemporaryFile() as log,
    ):
        env = aws.env
        kinesis, s3 = boto3_client(env, "kinesis"), boto3_client(env, "s3")
        stream, bucket = f"lat-{uuid.uuid4().hex[:8]}", f"lat-{uuid.uuid4().hex[:8]}"
        create_stream(kinesis, stream, 2)
        s3.create_bucket(Bucket=bucket)
        logs = {mode: Path(workdir) / f"{mode}.tsv" for mode in MODES}
        workers = {
            mode: start_worker(
                {
                    **os.environ,
                    "PYTHONPATH": str(REPO),
                    "LANDER_STREAM": stream,
                    "LANDER_LEASE_TABLE": f"{stream}-{mode}",
                    "LANDER_READ_MODE": mode,
                    "LANDER_ARCHIVE": f"s3://{bucket}/{mode}",
                    "LANDER_PROCESSOR": "bench.latency_probe:TimedLander",
                    "LATENCY_LOG": str(logs[mode]),
                    "LANDER_FLUSH_SECONDS": str(FLUSH_SECONDS),
                    "LANDER_LOG_FORMAT": "json",
                },
                log,
                cwd=REPO,
            )
            for mode in MODES
        }
        put_times: dict[str, float] = {}
        landed: dict[str, dict[str, float]] = {mode: {} for mode in MODES}
        read: dict[str, float] = {}
        stop = threading.Event()
        reader = threading.Thread(target=_bare_reader, args=(env, stream, put_times, read, stop))
        try:
            time.sleep(8.0)  # leases taken, the stream consumer registered and subscribed
            reader.start()
            seen: set[str] = set()
            began = time.monotonic()
            next_put = began
            counter = 0
            while time.monotonic() - began < seconds + 3 * FLUSH_SECONDS:
                now = time.monotonic()
                if now - began < seconds and now >= next_put:
                    ident = f"r{counter}"
                    kinesis.put_record(
                        StreamName=stream,
                        Data=json.dumps({"id": ident}).encode(),
                        PartitionKey=ident,
                    )
                    put_times[ident] = time.time()
                    counter += 1
                    next_put += 1.0 / rate
                    continue
                _watch(s3, bucket, seen, landed)
                time.sleep(0.25)
        finally:
            stop.set()
            if reader.is_alive():
                reader.join()
            for worker in workers.values():
                worker.send_signal(signal.SIGTERM)
            for worker in workers.values():
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
        delivered = {mode: _delivered(logs[mode]) for mode in MODES}
    result: dict[str, Any] = {
        "emulator": "kinesis-local",
        "flush_seconds": FLUSH_SECONDS,
        "rate_per_second": rate,
        "seconds": seconds,
        "produced": len(put_times),
        "bare_put_to_read": _summary([read[i] - put_times[i] for i in put_times if i in read]),
    }
    for mode in MODES:
        result[mode] = {
            "delivered": len(delivered[mode]),
            "landed": len(landed[mode]),
            "put_to_delivered": _summary(
                [delivered[mode][i] - put_times[i] for i in put_times if i in delivered[mode]]
            ),
            "put_to_landed": _summary(
                [landed[mode][i] - put_times[i] for i in put_times if i in landed[mode]]
            ),
        }
    polling, efo = result["polling"]["put_to_delivered"], result["efo"]["put_to_delivered"]
    result["efo_over_polling_delivered_p50"] = round(efo["p50"] / polling["p50"], 2)
    result["efo_over_polling_delivered_p99"] = round(efo["p99"] / polling["p99"], 2)
    return result


def render(result: dict[str, Any]) -> str:
    """A readable table."""
    bare = result["bare_put_to_read"]
    lines = [
        f"latency by read mode on {result.get('emulator', 'kinesalite')}, "
        f"{result['produced']} records at {result['rate_per_second']}/s, "
        f"LANDER_FLUSH_SECONDS={result['flush_seconds']}",
    ]
    for mode in MODES:
        row = result[mode]
        got, landed = row["put_to_delivered"], row["put_to_landed"]
        lines.append(
            f"  {mode:<7} put -> delivered: p50 {got['p50']:.2f} s  p99 {got['p99']:.2f} s"
            f"   put -> landed: p50 {landed['p50']:.2f} s  p99 {landed['p99']:.2f} s"
            f"   ({row['delivered']} delivered, {row['landed']} landed)"
        )
    lines += [
        f"  bare GetRecords put -> read: p50 {bare['p50']:.2f} s  p99 {bare['p99']:.2f} s",
        f"  efo / polling, put -> delivered: p50 x{result['efo_over_polling_delivered_p50']}"
        f"  p99 x{result['efo_over_polling_delivered_p99']}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run("--quick" in sys.argv)))
