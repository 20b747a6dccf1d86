"""Drain a pre-filled stream with the ``async-kinesis`` package's Consumer; print JSON.

Run by ``bench/drain.py`` with ``.venv-peers/bin/python`` (the package lives in its own
venv, see ``bench/requirements-peers.txt``), against the same kinesalite stream the
other sides drain, in the same run. It imports nothing from the project.

How the package is used (its documented API, version 3.0.1):

* ``kinesis.Consumer`` with its default ``MemoryCheckPointer`` (in-process: no Redis,
  no DynamoDB; nothing is coordinated with other consumers), ``iterator_type``
  TRIM_HORIZON, ``record_limit`` 10,000 (its default), and ``shard_fetch_rate=5``: the
  5 GetRecords calls/s/shard the other sides obey (its default is 1 call/s, "so that
  several consumers can share a shard's limit").
* a processor that hands each record's bytes through untouched (its default
  ``JsonProcessor`` would ``json.loads`` every record, which the other sides do not do).
* items are taken with ``async for item in consumer`` until every record is counted.
  The iteration ends after ``idle_timeout`` seconds with an empty queue (or after 100
  checkpoint markers), so the loop re-enters it; the consumer checkpoints (in memory)
  each shard's last sequence number after every page, when the next item is asked for.

Timed from creating the consumer (it describes the stream on entry) to the last record
counted, like the worker side, which includes its start-up. GetRecords calls are timed
by wrapping the client's method, to give the same in-flight and gap figures.

    .venv-peers/bin/python bench/peers/async_kinesis_drain.py STREAM EXPECTED
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from importlib import metadata
from typing import Any
from urllib.parse import urlparse

LOOPBACK = "127.0.0.1"


class RawProcessor:
    """What the Consumer needs of a processor: ``parse(data)`` yielding items."""

    def parse(self, data: bytes) -> Iterator[bytes]:
        """The record's bytes, one item per record (no aggregation, no decoding)."""
        yield data


async def drain(
    stream: str, expected: int, *, fetch_rate: int, idle_timeout: float, limit_seconds: float
) -> dict[str, Any]:
    """Read ``expected`` records with the package's Consumer; timings and call log."""
    kinesis = importlib.import_module("kinesis")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_KINESIS") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint is None or urlparse(endpoint).hostname != LOOPBACK:
        raise SystemExit(f"refusing to run: Kinesis endpoint {endpoint!r} is not on {LOOPBACK}")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    calls: list[tuple[str, float, float]] = []
    shard_of: dict[str, str] = {}

    def timed_iterator(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def get_shard_iterator(**kwargs: Any) -> Any:
            response = await inner(**kwargs)
            shard_of[response["ShardIterator"]] = kwargs["ShardId"]
            return response

        return get_shard_iterator

    def timed_records(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def get_records(**kwargs: Any) -> Any:
            shard = shard_of.pop(kwargs["ShardIterator"], "?")
            started = time.perf_counter()
            response = await inner(**kwargs)
            if response["Records"]:
                calls.append((shard, started, time.perf_counter()))
            if response.get("NextShardIterator"):
                shard_of[response["NextShardIterator"]] = shard
            return response

        return get_records

    cpu = time.process_time()
    began = time.perf_counter()
    first: float | None = None
    last: float | None = None
    count = 0
    checkpointer = kinesis.MemoryCheckPointer(name="bench")
    consumer = kinesis.Consumer(
        stream,
        endpoint_url=endpoint,
        region_name=region,
        iterator_type="TRIM_HORIZON",
        shard_fetch_rate=fetch_rate,
        idle_timeout=idle_timeout,
        checkpointer=checkpointer,
        processor=RawProcessor(),
    )
    async with consumer:
        client = consumer.client
        client.get_shard_iterator = timed_iterator(client.get_shard_iterator)
        client.get_records = timed_records(client.get_records)
        while count < expected:
            if time.perf_counter() - began > limit_seconds:
                raise SystemExit(f"async-kinesis counted {count} of {expected} records")
            async for _item in consumer:
                if first is None:
                    first = time.perf_counter()
                count += 1
                if count >= expected:
                    last = time.perf_counter()
                    break
        close_began = time.perf_counter()
    closed = time.perf_counter()
    if first is None or last is None:
        raise SystemExit("async-kinesis finished without counting a record")
    return {
        "records": count,
        "seconds": last - began,
        "first_record_seconds": first - began,
        "stop_seconds": closed - close_began,
        "cpu_seconds": time.process_time() - cpu,
        "last_record_at": last,
        "calls": calls,
        "checkpoints": {
            shard: str(value.get("sequence"))
            for shard, value in checkpointer.get_all_checkpoints().items()
        },
        "versions": {
            name: metadata.version(name) for name in ("async-kinesis", "aiobotocore", "botocore")
        },
        "settings": {
            "checkpointer": "MemoryCheckPointer",
            "shard_fetch_rate": fetch_rate,
            "record_limit": 10_000,
            "max_queue_size": 10_000,
            "idle_timeout": idle_timeout,
            "processor": "raw bytes (parse yields the record's data)",
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, drain, print one JSON object on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("stream")
    parser.add_argument("expected", type=int, help="records in the stream (all shards)")
    parser.add_argument("--fetch-rate", type=int, default=5, help="GetRecords calls/s/shard")
    parser.add_argument("--idle-timeout", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    result = asyncio.run(
        drain(
            args.stream,
            args.expected,
            fetch_rate=args.fetch_rate,
            idle_timeout=args.idle_timeout,
            limit_seconds=args.timeout,
        )
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
