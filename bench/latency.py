"""End-to-end latency: from PutRecord returning to the record's object being in S3.

One worker process lands a 2-shard stream with ``LANDER_FLUSH_SECONDS=5`` while a
producer puts timestamped records at a steady rate; a watcher lists the bucket every
250 ms and reads each new object. Baseline, in the same run and on the same stream: a
bare GetRecords poller (one call per second per shard, like the lander's idle poll)
measuring put -> read. Everything on 127.0.0.1; every process is stopped by PID.
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


def run(quick: bool = False) -> dict[str, Any]:
    """Produce for a while, watch the bucket, and report both latency distributions."""
    seconds = 20 if quick else 60
    rate = 50
    with local_aws() as aws, tempfile.TemporaryFile() as log:
        env = aws.env
        kinesis, s3 = boto3_client(env, "kinesis"), boto3_client(env, "s3")
        stream, bucket = f"lat-{uuid.uuid4().hex[:8]}", f"lat-{uuid.uuid4().hex[:8]}"
        create_stream(kinesis, stream, 2)
        s3.create_bucket(Bucket=bucket)
        worker = start_worker(
            {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "LANDER_STREAM": stream,
                "LANDER_LEASE_TABLE": f"{stream}-leases",
                "LANDER_ARCHIVE": f"s3://{bucket}/landed",
                "LANDER_FLUSH_SECONDS": str(FLUSH_SECONDS),
                "LANDER_LOG_FORMAT": "json",
            },
            log,
            cwd=REPO,
        )
        put_times: dict[str, float] = {}
        landed: dict[str, float] = {}
        read: dict[str, float] = {}
        stop = threading.Event()
        reader = threading.Thread(target=_bare_reader, args=(env, stream, put_times, read, stop))
        try:
            time.sleep(3.0)  # let the worker take its leases
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
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                    for item in page.get("Contents", []):
                        if item["Key"] in seen or parse_key(item["Key"]) is None:
                            continue  # seen, or not a landed object (the archive probe)
                        seen.add(item["Key"])
                        found = time.time()
                        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                        for line in gzip.decompress(body).splitlines():
                            landed.setdefault(json.loads(line)["data"]["id"], found)
                time.sleep(0.25)
        finally:
            stop.set()
            if reader.is_alive():
                reader.join()
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    landed_latency = [landed[i] - put_times[i] for i in put_times if i in landed]
    read_latency = [read[i] - put_times[i] for i in put_times if i in read]
    lander = _summary(landed_latency)
    bare = _summary(read_latency)
    return {
        "flush_seconds": FLUSH_SECONDS,
        "rate_per_second": rate,
        "seconds": seconds,
        "produced": len(put_times),
        "landed": len(landed_latency),
        "lander_put_to_landed": lander,
        "bare_put_to_read": bare,
        "p50_over_bare": round(lander["p50"] - bare["p50"], 3),
        "p99_over_bare": round(lander["p99"] - bare["p99"], 3),
    }


def render(result: dict[str, Any]) -> str:
    """A readable table."""
    lander, bare = result["lander_put_to_landed"], result["bare_put_to_read"]
    return "\n".join(
        [
            f"end-to-end latency, {result['produced']} records at {result['rate_per_second']}/s, "
            f"LANDER_FLUSH_SECONDS={result['flush_seconds']}, landed {result['landed']}",
            f"  put -> landed in S3 (lander) : p50 {lander['p50']:.2f} s  "
            f"p99 {lander['p99']:.2f} s  max {lander['max']:.2f} s",
            f"  put -> read (bare GetRecords): p50 {bare['p50']:.2f} s  p99 {bare['p99']:.2f} s",
            f"  lander minus bare            : p50 +{result['p50_over_bare']:.2f} s  "
            f"p99 +{result['p99_over_bare']:.2f} s",
        ]
    )


if __name__ == "__main__":
    print(render(run("--quick" in sys.argv)))
