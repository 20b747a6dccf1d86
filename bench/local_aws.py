"""The embedded local AWS stack, set up for a benchmark: loopback only, product defaults.

While a benchmark runs, this process's environment points every AWS SDK (aiobotocore
in-process, boto3 for setup and observation, the worker processes it starts) at the
stack, with dummy credentials; ``LANDER_*`` variables are removed so that the worker
runs with the product's defaults unless a benchmark sets one on purpose.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3

from consumer.cli.emulators import LocalStack
from consumer.cli.harness import wait_stream_active

LOOPBACK = "127.0.0.1"

# Variables that could send a client somewhere else, or make it look for a profile.
_DROPPED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE")


@dataclass(frozen=True)
class LocalAws:
    """A running stack: the environment that points at it and its emulators' PIDs."""

    env: dict[str, str]
    pids: dict[str, int]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) each emulator process has used so far."""
        return {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc (NaN where unavailable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    # Fields after the parenthesised command name; utime and stime are 14th and 15th.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def local_aws(kinesis: str = "kinesalite") -> Iterator[LocalAws]:
    """Start a LocalStack (``kinesis``: its Kinesis emulator), point this process at
    it, and yield where it is."""
    saved = dict(os.environ)
    stack = LocalStack(kinesis=kinesis).start()
    try:
        env = {
            **stack.env(),
            # A catch-all so that no other service endpoint can leave the machine.
            "AWS_ENDPOINT_URL": stack.dynamodb_endpoint,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        for key, value in env.items():
            if key.startswith("AWS_ENDPOINT_URL") and urlparse(value).hostname != LOOPBACK:
                raise RuntimeError(f"{key}={value} is not on {LOOPBACK}")
        for key in [k for k in os.environ if k.startswith("LANDER_") or k in _DROPPED]:
            del os.environ[key]
        os.environ.update(env)
        yield LocalAws(env, stack.pids)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        stack.stop()


def boto3_client(env: dict[str, str], service: str) -> Any:
    """A plain boto3 client on the stack, for setup and for watching the table."""
    return boto3.client(
        service,
        region_name=env["AWS_REGION"],
        endpoint_url=env[f"AWS_ENDPOINT_URL_{service.upper()}"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


def shard_hash_keys(kinesis: Any, stream: str) -> dict[str, str]:
    """Each open shard's starting hash key: an ExplicitHashKey that lands in it."""
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    return {
        shard["ShardId"]: shard["HashKeyRange"]["StartingHashKey"]
        for shard in shards
        if "EndingSequenceNumber" not in shard["SequenceNumberRange"]
    }


def create_stream(kinesis: Any, stream: str, shards: int, timeout: float = 30.0) -> None:
    """Create a stream and wait until it is ACTIVE."""
    kinesis.create_stream(StreamName=stream, ShardCount=shards)
    wait_stream_active(kinesis, stream, timeout)
